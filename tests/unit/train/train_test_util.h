// Helpers shared by the gcx-train unit tests: a temporary folder and small
// synthetic data sets that a tiny model can learn in a few epochs.
#ifndef GCX_TRAIN_TEST_UTIL_H
#define GCX_TRAIN_TEST_UTIL_H

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <unistd.h>

#include "data.h"
#include "util.h"

namespace train_test {

// A fresh folder under /tmp, removed with its files at scope exit.
class TempDir {
  public:
    TempDir()
    {
        char tmpl[] = "/tmp/gcx-train-test-XXXXXX";
        const char *d = mkdtemp(tmpl);
        path_ = d ? d : "";
    }
    ~TempDir()
    {
        if (!path_.empty()) {
            std::string cmd = "rm -rf '" + path_ + "'";
            if (system(cmd.c_str()) != 0) {
                // nothing more to do in a destructor
            }
        }
    }
    const std::string &path() const { return path_; }
    std::string file(const std::string &name) const
    {
        return path_ + "/" + name;
    }

  private:
    std::string path_;
};

// n samples of rows x cols pixels; class c is a bright vertical bar at
// column c (scaled to the width) over a noisy background, so that a small MLP
// separates the classes in a few epochs.
inline train_dataset_t make_bars(size_t n, int rows, int cols, uint64_t seed)
{
    train_dataset_t set;
    train_rng_t rng;
    size_t dim = (size_t)rows * cols;

    memset(&set, 0, sizeof(set));
    set.n = n;
    set.rows = rows;
    set.cols = cols;
    set.pixels = (uint8_t *)malloc(n * dim);
    set.labels = (uint8_t *)malloc(n);
    train_rng_seed(&rng, seed, 7);
    for (size_t i = 0; i < n; i++) {
        int c = (int)train_rng_below(&rng, TRAIN_NUM_CLASSES);
        int col = c * cols / TRAIN_NUM_CLASSES;

        set.labels[i] = (uint8_t)c;
        for (int r = 0; r < rows; r++) {
            for (int q = 0; q < cols; q++) {
                int v = (int)train_rng_below(&rng, 100);
                if (q == col) {
                    v += 150;
                }
                set.pixels[i * dim + (size_t)r * cols + q] = (uint8_t)v;
            }
        }
    }
    for (int v = 0; v < 256; v++) {
        set.lut[v] = (float)v / 255.0f;
    }
    return set;
}

} // namespace train_test

#endif
