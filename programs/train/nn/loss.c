/*
 * loss.c - softmax cross-entropy, the loss of every gcx-train model.
 *
 * Numerically stable form: loss = log(sum_j exp(z_j - max)) - (z_y - max).
 * The gradient of the mean loss is (softmax(z) - onehot(y)) / batch.
 * Cost: O(batch x classes) with one exp per logit; sums in double.
 */
#include "nn/net.h"

#include <math.h>

double train_softmax_xent(const float *logits, const uint8_t *y, int batch,
                          int classes, float *dlogits, int *correct_p)
{
    double total = 0;
    int correct = 0;
    int b, j;

    for (b = 0; b < batch; b++) {
        const float *z = logits + (size_t)b * classes;
        double zmax = z[0], sum = 0, lse;
        int arg = 0;

        for (j = 1; j < classes; j++) {
            if (z[j] > zmax) {
                zmax = z[j];
                arg = j;
            }
        }
        for (j = 0; j < classes; j++) {
            sum += exp((double)z[j] - zmax);
        }
        lse = log(sum);
        total += lse - ((double)z[y[b]] - zmax);
        correct += (arg == y[b]);
        if (dlogits != NULL) {
            float *d = dlogits + (size_t)b * classes;

            for (j = 0; j < classes; j++) {
                double p = exp((double)z[j] - zmax - lse);

                d[j] = (float)((p - (j == y[b])) / batch);
            }
        }
    }
    *correct_p = correct;
    return total;
}
