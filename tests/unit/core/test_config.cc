// Unit tests of the GCX_* configuration table: defaults, parsing, errors.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

extern "C" {
#include "base/config.h"
#include "coll/allreduce/allreduce.h"
}

namespace {

class EnvGuard {
  public:
    EnvGuard(const char *name, const char *value) : name_(name)
    {
        const char *old = getenv(name);
        had_ = old != nullptr;
        if (had_) {
            old_ = old;
        }
        setenv(name, value, 1);
    }
    ~EnvGuard()
    {
        if (had_) {
            setenv(name_.c_str(), old_.c_str(), 1);
        } else {
            unsetenv(name_.c_str());
        }
    }

  private:
    std::string name_, old_;
    bool        had_;
};

TEST(Config, EveryDefaultParses)
{
    ASSERT_GT(gcx_config_count(), 0u);
    for (size_t i = 0; i < gcx_config_count(); ++i) {
        const gcx_config_entry_t *e = gcx_config_at(i);
        struct gcx_config c;
        memset(&c, 0, sizeof(c));
        ASSERT_NE(nullptr, e);
        EXPECT_EQ(GCX_OK, gcx_config_parse_entry(e, e->default_value, &c))
            << e->name;
        EXPECT_NE(nullptr, e->doc);
    }
    EXPECT_EQ(nullptr, gcx_config_at(gcx_config_count()));
}

// Every area's rows are registered once, and the table lists them bottom up
// by layer, then by area, whatever order the constructors ran in.
TEST(Config, AreasRegisteredInLayerOrder)
{
    const gcx_config_rows_t *prev = nullptr;
    size_t                   rows = 0;
    for (const gcx_config_rows_t *r = gcx_config_areas(); r != nullptr;
         r = r->next) {
        if (prev != nullptr) {
            EXPECT_TRUE(prev->layer < r->layer ||
                        (prev->layer == r->layer &&
                         std::string(prev->area) < std::string(r->area)))
                << prev->area << " before " << r->area;
        }
        rows += r->count;
        prev = r;
    }
    EXPECT_EQ(gcx_config_count(), rows);
    EXPECT_STREQ("base", gcx_config_areas()->area);
    // one row per name: no area registers a name another one has
    for (size_t i = 0; i < gcx_config_count(); ++i) {
        EXPECT_EQ(gcx_config_at(i), gcx_config_find(gcx_config_at(i)->name))
            << gcx_config_at(i)->name;
    }
    // the rows of the areas above base are there
    for (const char *name : {"TRANSPORT", "TIMEOUT", "RANK", "CHECK_ARGS",
                             "PIPELINE_CHUNK", "ALLREDUCE_ALGO", "BCAST_ALGO",
                             "SPARSE_ALGO", "CODED_MAX_LAG", "GRAVAC_POLICY"}) {
        EXPECT_NE(nullptr, gcx_config_find(name)) << name;
    }
}

TEST(Config, DefaultsAreUsedWithoutEnvironment)
{
    gcx_config_t *c = nullptr;
    ASSERT_EQ(GCX_OK, gcx_config_read(&c));
    EXPECT_DOUBLE_EQ(300.0, c->timeout);
    EXPECT_EQ(GCX_ALLREDUCE_ALGO_AUTO, c->allreduce_algo);
    EXPECT_EQ(64u * 1024u, c->allreduce_small_msg);
    EXPECT_EQ(-1, c->rank);
    EXPECT_EQ(1, c->check_args);
    gcx_config_release(c);
}

TEST(Config, EnvironmentValuesAreParsed)
{
    EnvGuard a("GCX_TIMEOUT", "2.5");
    EnvGuard b("GCX_ALLREDUCE_ALGO", "RING");
    EnvGuard d("GCX_PIPELINE_CHUNK", "1M");
    EnvGuard e("GCX_CHECK_ARGS", "off");
    gcx_config_t *c = nullptr;
    ASSERT_EQ(GCX_OK, gcx_config_read(&c));
    EXPECT_DOUBLE_EQ(2.5, c->timeout);
    EXPECT_EQ(GCX_ALLREDUCE_ALGO_RING, c->allreduce_algo);
    EXPECT_EQ(1u << 20, c->pipeline_chunk);
    EXPECT_EQ(0, c->check_args);
    gcx_config_release(c);
}

struct BadValue {
    const char *name, *value;
};

class ConfigBad : public ::testing::TestWithParam<BadValue> {};

TEST_P(ConfigBad, IsRejectedWithTheVariableNamed)
{
    EnvGuard      g(GetParam().name, GetParam().value);
    gcx_config_t *c = reinterpret_cast<gcx_config_t *>(0x1);
    testing::internal::CaptureStderr();
    EXPECT_EQ(GCX_ERR_INVALID, gcx_config_read(&c));
    std::string err = testing::internal::GetCapturedStderr();
    EXPECT_NE(std::string::npos, err.find(GetParam().name)) << err;
    EXPECT_NE(std::string::npos, err.find("accepted")) << err;
    EXPECT_EQ(reinterpret_cast<gcx_config_t *>(0x1), c); // untouched
}

INSTANTIATE_TEST_SUITE_P(
    Values, ConfigBad,
    ::testing::Values(BadValue{"GCX_TIMEOUT", "abc"},
                      BadValue{"GCX_TIMEOUT", "-1"},
                      BadValue{"GCX_TIMEOUT", "inf"},
                      BadValue{"GCX_ALLREDUCE_ALGO", "fastest"},
                      BadValue{"GCX_LOG_LEVEL", "verbose"},
                      BadValue{"GCX_CHECK_ARGS", "maybe"},
                      BadValue{"GCX_PIPELINE_CHUNK", "12Q"},
                      BadValue{"GCX_PIPELINE_CHUNK", "1"},
                      BadValue{"GCX_RANK", "1.5"},
                      BadValue{"GCX_ROOT_PORT", "70000"},
                      BadValue{"GCX_WORLD_SIZE", "x"}));

TEST(Config, SetAndGetByName)
{
    gcx_config_t *c = nullptr;
    char          buf[64];
    ASSERT_EQ(GCX_OK, gcx_config_read(&c));
    EXPECT_EQ(GCX_OK, gcx_config_set(c, "GCX_TIMEOUT", "7"));
    EXPECT_EQ(GCX_OK, gcx_config_set(c, "ALLREDUCE_SMALL_MSG", "32K"));
    EXPECT_EQ(GCX_OK, gcx_config_get(c, "TIMEOUT", buf, sizeof(buf)));
    EXPECT_STREQ("7", buf);
    EXPECT_EQ(GCX_OK, gcx_config_get(c, "GCX_ALLREDUCE_SMALL_MSG", buf,
                                     sizeof(buf)));
    EXPECT_STREQ("32K", buf);
    EXPECT_EQ(GCX_ERR_RANGE, gcx_config_get(c, "TIMEOUT", buf, 1));
    EXPECT_EQ(GCX_ERR_NOT_FOUND, gcx_config_set(c, "GCX_NO_SUCH", "1"));
    testing::internal::CaptureStderr();
    EXPECT_EQ(GCX_ERR_INVALID, gcx_config_set(c, "TIMEOUT", "soon"));
    testing::internal::GetCapturedStderr();
    EXPECT_DOUBLE_EQ(7.0, c->timeout); // a failed set changes nothing
    gcx_config_release(c);
}

TEST(Config, MarkdownListsEveryVariable)
{
    char  *text = nullptr;
    size_t len  = 0;
    FILE  *f    = open_memstream(&text, &len);
    gcx_config_print_markdown(f);
    fclose(f);
    std::string md(text, len);
    free(text);
    for (size_t i = 0; i < gcx_config_count(); ++i) {
        EXPECT_NE(std::string::npos,
                  md.find(std::string("`GCX_") + gcx_config_at(i)->name +
                          "`"));
    }
}

// GCX_JOB_TOKEN is a secret: gcx-info's listing (gcx_config_print) says
// that it is set but never shows it, nor does the error of a bad value.
TEST(Config, SecretIsNeverPrinted)
{
    const std::string secret = "s3cr3t-job-token";
    {
        EnvGuard      g("GCX_JOB_TOKEN", secret.c_str());
        gcx_config_t *c = nullptr;
        ASSERT_EQ(GCX_OK, gcx_config_read(&c));
        EXPECT_EQ(secret, c->job_token); // read as given
        char  *text = nullptr;
        size_t len  = 0;
        FILE  *f    = open_memstream(&text, &len);
        gcx_config_print(c, f);
        fclose(f);
        std::string listing(text, len);
        free(text);
        gcx_config_release(c);
        EXPECT_EQ(std::string::npos, listing.find(secret)) << listing;
        EXPECT_NE(std::string::npos, listing.find("GCX_JOB_TOKEN is set")) << listing;
        EXPECT_NE(std::string::npos, listing.find("GCX_ROOT_ADDR=")) << listing;
    }
    std::string too_long(GCX_CONFIG_STRING_MAX, 'k');
    EnvGuard      g("GCX_JOB_TOKEN", too_long.c_str());
    gcx_config_t *c = nullptr;
    testing::internal::CaptureStderr();
    EXPECT_EQ(GCX_ERR_INVALID, gcx_config_read(&c));
    std::string err = testing::internal::GetCapturedStderr();
    EXPECT_NE(std::string::npos, err.find("GCX_JOB_TOKEN")) << err;
    EXPECT_EQ(std::string::npos, err.find(too_long)) << err;
}

} // namespace
