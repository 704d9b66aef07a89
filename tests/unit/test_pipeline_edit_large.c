/* test_pipeline_edit_large.c - editing with three references of different sizes, one of them over the
 * pipeline's 1024^2 pixel cap (1100x1000: LANCZOS to 1073x976, crop to 1072x976, 4,087 reference tokens), against
 * the official pipeline (golden edit_r3): exact (>= 60 dB, diffusers folder) and default precision (>= 40 dB,
 * ComfyUI files). Apart from test_pipeline_edit because the large reference's VAE encode dominates its time. */
#include "edit_harness.h"

static void test_edit_r3(void) {
    run_case("edit_r3", false, true);
    run_case("edit_r3", true, false);
}

int main(void) {
    RUN(test_edit_r3);
    return test_summary();
}
