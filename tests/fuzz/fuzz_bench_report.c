/* fuzz_bench_report.c - libFuzzer target over the report reader: parse, schema walk, consistency rules and the
 * table printer must survive any bytes (no crash, no leak, no UB). Seed corpus: the three seed reports. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "bench/report.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    kiln_report *r;
    kiln_err err = {0};
    if (kiln_report_parse((const char *)data, size, "fuzz", &r, &err) != KILN_OK) return 0;
    FILE *null = fopen("/dev/null", "w");
    if (null) {
        kiln_report_print_table(r, null);
        fclose(null);
    }
    kiln_report_free(r);
    return 0;
}
