// test_tag.cc - the tags of collective steps (src/coll/coll.h,
// gcx_coll_tag): a task without a step_span numbers its steps on from its
// step_base; one with a span wraps them every span steps inside its range;
// a sub-task keeps its own span. The expected tags are put together here
// from the tag's layout (src/transport/transport.h: communicator id in bits
// 52-63, sequence 32-51, step 16-31, source 0-15), not by gcx.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>

extern "C" {
#include "coll/coll.h"
}

namespace {

uint64_t tag_of(uint64_t comm, uint64_t seq, uint64_t step, uint64_t src)
{
    return comm << 52 | seq << 32 | step << 16 | src;
}

void nothing(gcx_task_t *) {}

const gcx_task_ops_t kOps = {"tag test", nothing, nothing, nothing, nullptr};

struct Tags : ::testing::Test {
    void SetUp() override
    {
        std::memset(&comm, 0, sizeof(comm));
        comm.id   = 6;
        comm.size = 2000;
        std::memset(&task, 0xa5, sizeof(task)); /* init must clear it all */
        gcx_task_init(&task, &kOps, &comm);
        task.seq       = 9;
        task.step_base = 0x5c00; /* slot 7 of a schedule's second task */
    }
    gcx_comm_t comm;
    gcx_task_t task;
};

TEST_F(Tags, TaskInitLeavesNoSpan)
{
    EXPECT_EQ(0u, task.step_span);
}

TEST_F(Tags, WithoutASpanTheStepsRunOn)
{
    EXPECT_EQ(tag_of(6, 9, 0x5c00, 3), gcx_coll_tag(&task, 0, 3));
    EXPECT_EQ(tag_of(6, 9, 0x5c05, 1999), gcx_coll_tag(&task, 5, 1999));
    EXPECT_EQ(tag_of(6, 9, 0x5fff, 0), gcx_coll_tag(&task, 1023, 0));
    EXPECT_EQ(tag_of(6, 9, 0x6000, 0), gcx_coll_tag(&task, 1024, 0));
    EXPECT_EQ(tag_of(6, 9, 0x6006, 3), gcx_coll_tag(&task, 1030, 3));
}

TEST_F(Tags, WithASpanTheStepsWrapInsideIt)
{
    task.step_span = 1024; /* a sparse allreduce slot */
    EXPECT_EQ(tag_of(6, 9, 0x5c00, 3), gcx_coll_tag(&task, 0, 3));
    EXPECT_EQ(tag_of(6, 9, 0x5fff, 0), gcx_coll_tag(&task, 1023, 0));
    EXPECT_EQ(tag_of(6, 9, 0x5c00, 0), gcx_coll_tag(&task, 1024, 0));
    EXPECT_EQ(tag_of(6, 9, 0x5c06, 3), gcx_coll_tag(&task, 1030, 3));
    /* step 1998 of a 2000-rank ring: 1998 - 1024 = 974 = 0x3ce */
    EXPECT_EQ(tag_of(6, 9, 0x5fce, 1999), gcx_coll_tag(&task, 1998, 1999));
    /* the last of 65536 ranks' steps: 65534 - 63 * 1024 = 1022 */
    EXPECT_EQ(tag_of(6, 9, 0x5ffe, 7), gcx_coll_tag(&task, 65534, 7));

    task.step_span = 3; /* any span, not only powers of two */
    const uint64_t steps[8] = {0, 1, 2, 0, 1, 2, 0, 1};
    for (uint32_t k = 0; k < 8; ++k) {
        EXPECT_EQ(tag_of(6, 9, 0x5c00 + steps[k], 4),
                  gcx_coll_tag(&task, k, 4)) << "step " << k;
    }
}

TEST_F(Tags, ASubTaskKeepsItsOwnSpan)
{
    gcx_task_t plain, wrapped;

    task.step_span = 1024;
    gcx_task_init(&plain, &kOps, &comm);
    gcx_coll_subtask_post(&task, &plain, 0x800);
    EXPECT_EQ(9u, plain.seq);
    EXPECT_EQ(0x6400u, plain.step_base);
    EXPECT_EQ(0u, plain.step_span); /* not the parent's */
    EXPECT_EQ(tag_of(6, 9, 0x6806, 1), gcx_coll_tag(&plain, 1030, 1));

    gcx_task_init(&wrapped, &kOps, &comm);
    wrapped.step_span = 4; /* set by its creator before it is posted */
    gcx_coll_subtask_post(&task, &wrapped, 0x400);
    EXPECT_EQ(4u, wrapped.step_span);
    EXPECT_EQ(tag_of(6, 9, 0x6002, 1), gcx_coll_tag(&wrapped, 6, 1));
    EXPECT_EQ(tag_of(6, 9, 0x6003, 1), gcx_coll_tag(&wrapped, 1031, 1));
}

} // namespace
