/* test_bench_preflight.c - every preflight check's verdict on hand-made inputs: the contention gate over a
 * scripted utilization source, processes disclosed vs unexpected, the cap and the field it came from, the
 * cap-name check, systemd and upsc output parsing. */
#include <math.h>

#include "bench/preflight.h"
#include "test.h"

typedef struct util_script {
    const double *util; /* per read; NaN = unsupported */
    size_t n, next;
} util_script;

static bool util_source(void *ctx, kiln_tsample *out) {
    util_script *s = ctx;
    out->v[KILN_TF_UTIL_GPU] = s->util[s->next % s->n];
    out->v[KILN_TF_POWER_W] = 6.4;
    s->next++;
    return true;
}

static kiln_gate_cfg fast_gate(int attempts) {
    kiln_gate_cfg g = kiln_gate_cfg_default();
    g.window_s = 0.004; /* 4 samples 1 ms apart */
    g.samples = 4;
    g.attempts = attempts;
    g.retry_wait_s = 0;
    return g;
}

static void test_gate_judge_by_hand(void) {
    char t[128];
    double quiet[] = {0, 0, 10, 0}; /* mean 2.5 */
    CHECK(kiln_gate_judge(quiet, 4, 5.0, t, sizeof t));
    CHECK_EQ_STR(t, "quiet: mean 2.5% <= 5.0%");
    double busy[] = {0, 30, 0, 0}; /* mean 7.5 */
    CHECK(!kiln_gate_judge(busy, 4, 5.0, t, sizeof t));
    CHECK_EQ_STR(t, "busy: mean 7.5% > 5.0%");
    double edge[] = {5, 5};
    CHECK(kiln_gate_judge(edge, 2, 5.0, t, sizeof t)); /* <= is quiet */
    double blind[] = {NAN, NAN};
    CHECK(!kiln_gate_judge(blind, 2, 5.0, t, sizeof t));
    CHECK(strstr(t, "blind") != NULL);
}

static void test_gate_attempts(void) {
    /* First attempt busy (reads 1-4: 40, 0, 0, 0 -> mean 10), second quiet (reads 5-8: all 0). */
    double u[] = {40, 0, 0, 0, 0, 0, 0, 0};
    util_script s = {u, 8, 0};
    kiln_gate_cfg g = fast_gate(3);
    kiln_verdict v;
    json_t *gate = kiln_gate_run(util_source, &s, &g, &v);
    CHECK(v.passed);
    CHECK_EQ_STR(v.text, "quiet: mean 0.0% <= 5.0%");
    json_t *att = json_object_get(gate, "attempts");
    CHECK_EQ_INT(json_array_size(att), 2);
    CHECK_EQ_STR(json_string_value(json_object_get(json_array_get(att, 0), "verdict")), "busy: mean 10.0% > 5.0%");
    CHECK_NEAR(json_real_value(json_object_get(json_object_get(json_array_get(att, 0), "utilization_pct"), "max")), 40, 0);
    CHECK_EQ_INT(json_integer_value(json_object_get(json_array_get(att, 1), "attempt")), 2);
    CHECK(json_is_true(json_object_get(gate, "passed")));
    json_decref(gate);
    /* Always busy: refused after the configured attempts. */
    double b[] = {50};
    util_script sb = {b, 1, 0};
    g = fast_gate(2);
    gate = kiln_gate_run(util_source, &sb, &g, &v);
    CHECK(!v.passed);
    CHECK_EQ_STR(v.text, "refused after 2 attempt(s): busy: mean 50.0% > 5.0%");
    CHECK_EQ_INT(json_array_size(json_object_get(gate, "attempts")), 2);
    json_decref(gate);
    /* No telemetry: not applicable, says why. */
    gate = kiln_gate_run(NULL, NULL, &g, &v);
    CHECK(!v.passed);
    CHECK(json_is_false(json_object_get(gate, "applicable")));
    CHECK(strstr(v.text, "no GPU telemetry") != NULL);
    json_decref(gate);
}

/* A scripted driver history: `n` samples of value `v`. */
typedef struct hist_script {
    size_t n;
    double v;
    uint64_t since;
} hist_script;
static size_t hist_source(void *ctx, uint64_t since_us, double *out, size_t cap) {
    hist_script *h = ctx;
    h->since = since_us;
    size_t n = h->n < cap ? h->n : cap;
    for (size_t i = 0; i < n; i++) out[i] = h->v;
    return n;
}

static void test_gate_prefers_driver_samples(void) {
    double busy[] = {50};
    util_script s = {busy, 1, 0};
    hist_script h = {8, 1.0, 0};
    kiln_gate_cfg g = fast_gate(1);
    g.history = hist_source;
    g.history_ctx = &h;
    kiln_verdict v;
    json_t *gate = kiln_gate_run(util_source, &s, &g, &v);
    CHECK(v.passed); /* polled reads said 50 %, the driver's own samples 1 %: the samples decide */
    CHECK_EQ_STR(v.text, "quiet: mean 1.0% <= 5.0%");
    CHECK(h.since > 1000000000ULL * 1000000ULL); /* asked from the attempt's start, Unix microseconds */
    json_t *a0 = json_array_get(json_object_get(gate, "attempts"), 0);
    CHECK_EQ_STR(json_string_value(json_object_get(a0, "judged_on")), "driver samples");
    CHECK_EQ_INT(json_integer_value(json_object_get(json_object_get(a0, "driver_samples"), "n")), 8);
    CHECK_NEAR(json_real_value(json_object_get(json_object_get(a0, "utilization_pct"), "mean")), 50, 0);
    json_decref(gate);
    h.n = 0; /* no driver samples: back to the polled readings */
    s.next = 0;
    gate = kiln_gate_run(util_source, &s, &g, &v);
    CHECK(!v.passed);
    CHECK_EQ_STR(json_string_value(json_object_get(json_array_get(json_object_get(gate, "attempts"), 0), "judged_on")),
                 "polled readings");
    json_decref(gate);
}

static void test_processes(void) {
    kiln_gpu_process p[] = {{100, 512}, {200, NAN}, {300, 1024}};
    unsigned disclosed[] = {100, 300};
    kiln_verdict v;
    json_t *r = kiln_processes_check(p, 3, disclosed, 2, &v);
    CHECK(!v.passed);
    CHECK_EQ_INT(json_array_size(json_object_get(r, "unexpected")), 1);
    CHECK_EQ_INT(json_integer_value(json_object_get(json_array_get(json_object_get(r, "unexpected"), 0), "pid")), 200);
    CHECK_NEAR(json_real_value(json_object_get(r, "disclosed_mib")), 1536, 0);
    CHECK(json_is_false(json_object_get(r, "clear")));
    json_decref(r);
    r = kiln_processes_check(p, 1, disclosed, 1, &v);
    CHECK(v.passed);
    json_decref(r);
    r = kiln_processes_check(NULL, 0, NULL, 0, &v);
    CHECK(v.passed && json_is_true(json_object_get(r, "clear")));
    json_decref(r);
}

static void test_cap_and_field(void) {
    json_t *cap = kiln_cap_new();
    kiln_power_limits mobile = {NAN, 95, NAN, 80, 175}; /* no power.limit answer: enforced is recorded */
    kiln_cap_add_card(cap, "GPU-a", &mobile);
    CHECK_NEAR(kiln_cap_watts(cap), 95, 0);
    CHECK_EQ_STR(json_string_value(json_object_get(cap, "field")), "enforced.power.limit");
    CHECK(json_is_true(json_object_get(cap, "agree")));
    kiln_power_limits desk = {450, 440, 450, 100, 480}; /* power.limit answers: it is the cap, enforced beside */
    kiln_cap_add_card(cap, "GPU-b", &desk);
    CHECK(json_is_false(json_object_get(cap, "agree")));
    CHECK(isnan(kiln_cap_watts(cap)));
    CHECK_EQ_STR(json_string_value(json_object_get(json_object_get(cap, "per_card_field"), "GPU-b")), "power.limit");
    CHECK_NEAR(json_real_value(json_object_get(json_object_get(json_object_get(cap, "per_card_limits_w"), "GPU-b"),
                                               "enforced.power.limit")), 440, 0);
    json_decref(cap);
}

static void test_cap_name(void) {
    CHECK_NEAR(kiln_cap_claimed_by_name("r1-r1-95w"), 95, 0);
    CHECK_NEAR(kiln_cap_claimed_by_name("3090ti-450W-run"), 450, 0);
    CHECK(isnan(kiln_cap_claimed_by_name("klein-4b-8st")));
    CHECK(isnan(kiln_cap_claimed_by_name("r95wx")));
    CHECK(isnan(kiln_cap_claimed_by_name(NULL)));
    kiln_verdict v;
    json_t *c = kiln_cap_name_check("r1-r1-95w", 95.0, &v);
    CHECK(v.passed);
    CHECK_EQ_STR(v.text, "the name and the card agree at 95 W");
    json_decref(c);
    c = kiln_cap_name_check("r1-r1-95w", 175.0, &v);
    CHECK(!v.passed);
    CHECK_EQ_STR(v.text, "the name claims 95 W but the card is capped at 175.0 W");
    json_decref(c);
    c = kiln_cap_name_check("r1-r1-95w", NAN, &v);
    CHECK(!v.passed);
    json_decref(c);
    c = kiln_cap_name_check("cpu-tiny", NAN, &v);
    CHECK(v.passed);
    CHECK(json_is_null(json_object_get(c, "cap_claimed_by_name_w")));
    json_decref(c);
}

static void test_service_and_ups_parsers(void) {
    kiln_verdict v;
    json_t *s = kiln_service_parse("comfyui.service",
                                   "ActiveState=inactive\nUnitFileState=disabled\nMainPID=0\nExecMainStartTimestamp=\n",
                                   false, &v);
    CHECK(v.passed);
    CHECK_EQ_STR(json_string_value(json_object_get(s, "MainPID")), "0");
    CHECK_EQ_STR(json_string_value(json_object_get(s, "ExecMainStartTimestamp")), "");
    json_decref(s);
    s = kiln_service_parse("comfyui.service", "MainPID=4242\nActiveState=active\n", false, &v);
    CHECK(!v.passed);
    CHECK(strstr(v.text, "active (MainPID 4242)") != NULL);
    json_decref(s);
    s = kiln_service_parse("comfyui.service", "ActiveState=active\n", true, &v); /* the target itself */
    CHECK(v.passed);
    json_decref(s);
    s = kiln_service_parse("x.service", "garbage", false, &v);
    CHECK(!v.passed);
    json_decref(s);
    s = kiln_service_check("bad;rm -rf /", false, &v);
    CHECK(!v.passed && strstr(v.text, "refused"));
    json_decref(s);
    CHECK_NEAR(kiln_ups_parse("23\n"), 23, 0);
    CHECK_NEAR(kiln_ups_parse(" 7.5 "), 7.5, 0);
    CHECK(isnan(kiln_ups_parse("Error: Driver not connected")));
    CHECK(isnan(kiln_ups_parse("")));
    CHECK(isnan(kiln_ups_parse(NULL)));
    CHECK(isnan(kiln_ups_check(NULL, 80, &v)) && v.passed);
    kiln_ups_check("no-such-ups-kiln-test@localhost", 80, &v); /* no upsc here (or no such UPS): not passed */
    CHECK(!v.passed);
}

int main(void) {
    RUN(test_gate_judge_by_hand);
    RUN(test_gate_attempts);
    RUN(test_gate_prefers_driver_samples);
    RUN(test_processes);
    RUN(test_cap_and_field);
    RUN(test_cap_name);
    RUN(test_service_and_ups_parsers);
    return test_summary();
}
