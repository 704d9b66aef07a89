/* preflight.c - contention gate, GPU processes, power cap, cap-name check, systemd unit, UPS (see preflight.h). */
#include "bench/preflight.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "bench/stats.h"

kiln_gate_cfg kiln_gate_cfg_default(void) {
    return (kiln_gate_cfg){.max_util_pct = 5.0, .window_s = 10.0, .samples = 20, .attempts = 3, .retry_wait_s = 30};
}

static void set_verdict(kiln_verdict *v, bool passed, const char *text) {
    v->passed = passed;
    snprintf(v->text, sizeof v->text, "%s", text);
}

bool kiln_gate_judge(const double *util, size_t n, double max_util_pct, char *text, size_t cap) {
    kiln_reduction r = kiln_reduce(util, n);
    if (r.n == 0) {
        snprintf(text, cap, "blind: no utilization readings - the gate cannot certify a quiet card");
        return false;
    }
    bool quiet = r.mean <= max_util_pct;
    snprintf(text, cap, "%s: mean %.1f%% %s %.1f%%", quiet ? "quiet" : "busy", r.mean, quiet ? "<=" : ">",
             max_util_pct);
    return quiet;
}

json_t *kiln_gate_run(kiln_sample_fn fn, void *ctx, const kiln_gate_cfg *cfg, kiln_verdict *v) {
    json_t *gate = json_pack("{s:f,s:f,s:i,s:i,s:[]}", "max_util_pct", cfg->max_util_pct, "window_s", cfg->window_s,
                             "samples", cfg->samples, "max_attempts", cfg->attempts, "attempts");
    if (!gate) return NULL;
    if (!fn) {
        set_verdict(v, false, "no GPU telemetry: the contention gate cannot run");
        json_object_set_new(gate, "applicable", json_false());
        json_object_set_new(gate, "passed", json_false());
        json_object_set_new(gate, "verdict", json_string(v->text));
        return gate;
    }
    bool quiet = false;
    char text[256] = "no attempt";
    int samples = cfg->samples > 0 ? cfg->samples : 1;
    for (int a = 1; a <= cfg->attempts && !quiet; a++) {
        if (a > 1 && cfg->retry_wait_s > 0) {
            struct timespec ts = {(time_t)cfg->retry_wait_s, (long)(fmod(cfg->retry_wait_s, 1.0) * 1e9)};
            nanosleep(&ts, NULL);
        }
        uint64_t since_us = (uint64_t)(kiln_clock_wall_s() * 1e6);
        kiln_tsample *s;
        size_t n = kiln_sample_window(fn, ctx, (size_t)samples, cfg->window_s / samples, &s);
        double *x = kiln_calloc(n ? n : 1, sizeof *x);
        if (!x) {
            kiln_free(s);
            break;
        }
        json_t *att = json_object();
        json_object_set_new(att, "window_s", json_real(cfg->window_s));
        json_object_set_new(att, "samples", json_integer(samples));
        json_object_set_new(att, "card_seen", json_boolean(n > 0));
        json_object_set_new(att, "readings", json_integer((json_int_t)n));
        static const struct {
            const char *key;
            kiln_tfield f;
        } cols[] = {{"utilization_pct", KILN_TF_UTIL_GPU}, {"memory_used_mib", KILN_TF_MEM_USED_MIB},
                    {"power_w", KILN_TF_POWER_W}};
        for (size_t c = 0; c < 3; c++) {
            for (size_t i = 0; i < n; i++) x[i] = s[i].v[cols[c].f];
            json_object_set_new(att, cols[c].key, kiln_reduction_json(x, n));
        }
        for (size_t i = 0; i < n; i++) x[i] = s[i].v[KILN_TF_UTIL_GPU];
        double hist[1024];
        size_t nh = cfg->history ? cfg->history(cfg->history_ctx, since_us, hist, 1024) : 0;
        if (nh) {
            json_object_set_new(att, "driver_samples", kiln_reduction_json(hist, nh));
            quiet = kiln_gate_judge(hist, nh, cfg->max_util_pct, text, sizeof text);
        } else {
            quiet = kiln_gate_judge(x, n, cfg->max_util_pct, text, sizeof text);
        }
        json_object_set_new(att, "judged_on", json_string(nh ? "driver samples" : "polled readings"));
        json_object_set_new(att, "attempt", json_integer(a));
        json_object_set_new(att, "verdict", json_string(text));
        json_object_set_new(att, "quiet", json_boolean(quiet));
        json_array_append_new(json_object_get(gate, "attempts"), att);
        kiln_free(x);
        kiln_free(s);
    }
    char vt[512];
    if (quiet) snprintf(vt, sizeof vt, "%s", text);
    else snprintf(vt, sizeof vt, "refused after %d attempt(s): %s", cfg->attempts, text);
    set_verdict(v, quiet, vt);
    json_object_set_new(gate, "passed", json_boolean(quiet));
    json_object_set_new(gate, "verdict", json_string(vt));
    return gate;
}

json_t *kiln_processes_check(const kiln_gpu_process *procs, size_t n, const unsigned *disclosed_pids,
                             size_t n_disclosed, kiln_verdict *v) {
    json_t *out = json_pack("{s:[],s:[]}", "disclosed", "unexpected");
    if (!out) return NULL;
    double disclosed_mib = 0;
    size_t unexpected = 0;
    for (size_t i = 0; i < n; i++) {
        bool known = false;
        for (size_t k = 0; k < n_disclosed && !known; k++) known = procs[i].pid == disclosed_pids[k];
        json_t *p = json_pack("{s:I,s:o}", "pid", (json_int_t)procs[i].pid, "used_mib",
                              isnan(procs[i].used_mib) ? json_null() : json_real(procs[i].used_mib));
        json_array_append_new(json_object_get(out, known ? "disclosed" : "unexpected"), p);
        if (known && !isnan(procs[i].used_mib)) disclosed_mib += procs[i].used_mib;
        if (!known) unexpected++;
    }
    json_object_set_new(out, "disclosed_mib", json_real(disclosed_mib));
    json_object_set_new(out, "clear", json_boolean(unexpected == 0));
    char text[256];
    if (unexpected)
        snprintf(text, sizeof text, "%zu unexpected GPU process(es) (PIDs are host PIDs; disclose the target's own)",
                 unexpected);
    else snprintf(text, sizeof text, "clear: %zu disclosed GPU process(es), none unexpected", n - unexpected);
    set_verdict(v, unexpected == 0, text);
    return out;
}

json_t *kiln_cap_new(void) {
    return json_pack("{s:{},s:{},s:{},s:b,s:n,s:n,s:s}", "per_card_w", "per_card_field", "per_card_limits_w",
                     "agree", 1, "w", "field", "cap_field_note",
                     "power.limit when the board answers it, enforced.power.limit when it does not; the field is "
                     "recorded, never inferred");
}

static json_t *watts(double w) { return isnan(w) ? json_null() : json_real(w); }

void kiln_cap_add_card(json_t *cap, const char *uuid, const kiln_power_limits *lim) {
    double w = NAN;
    const char *field = NULL;
    if (!isnan(lim->limit)) {
        w = lim->limit;
        field = "power.limit";
    } else if (!isnan(lim->enforced)) {
        w = lim->enforced;
        field = "enforced.power.limit";
    }
    json_object_set_new(json_object_get(cap, "per_card_w"), uuid, watts(w));
    if (field) json_object_set_new(json_object_get(cap, "per_card_field"), uuid, json_string(field));
    json_object_set_new(json_object_get(cap, "per_card_limits_w"), uuid,
                        json_pack("{s:o,s:o,s:o,s:o,s:o}", "power.limit", watts(lim->limit), "enforced.power.limit",
                                  watts(lim->enforced), "power.default_limit", watts(lim->default_limit),
                                  "power.min_limit", watts(lim->min_limit), "power.max_limit",
                                  watts(lim->max_limit)));
    /* The run's cap: the cards' common value; disagreement (or a card without a cap) is recorded as such. */
    double first = NAN;
    const char *first_field = NULL;
    bool agree = true;
    const char *key;
    json_t *v;
    json_object_foreach(json_object_get(cap, "per_card_w"), key, v) {
        double x = json_is_number(v) ? json_number_value(v) : NAN;
        const char *f = json_string_value(json_object_get(json_object_get(cap, "per_card_field"), key));
        if (isnan(x)) agree = false;
        else if (isnan(first)) {
            first = x;
            first_field = f;
        } else if (fabs(x - first) > 0.05 || (f && first_field && strcmp(f, first_field))) agree = false;
    }
    json_object_set_new(cap, "agree", json_boolean(agree));
    json_object_set_new(cap, "w", agree ? watts(first) : json_null());
    json_object_set_new(cap, "field", agree && first_field ? json_string(first_field) : json_null());
}

double kiln_cap_watts(const json_t *cap) {
    json_t *w = json_object_get(cap, "w");
    return json_is_number(w) ? json_number_value(w) : NAN;
}

double kiln_cap_claimed_by_name(const char *name) {
    double found = NAN;
    if (!name) return found;
    size_t n = strlen(name);
    for (size_t i = 0; i < n; i++) {
        if (!isdigit((unsigned char)name[i]) || (i > 0 && isalnum((unsigned char)name[i - 1]))) continue;
        size_t j = i;
        while (j < n && isdigit((unsigned char)name[j])) j++;
        if (j < n && (name[j] == 'w' || name[j] == 'W') && (j + 1 == n || !isalnum((unsigned char)name[j + 1])) &&
            j - i <= 5)
            found = strtod(name + i, NULL);
        i = j;
    }
    return found;
}

json_t *kiln_cap_name_check(const char *arm, double measured_w, kiln_verdict *v) {
    double claimed = kiln_cap_claimed_by_name(arm);
    char text[256];
    bool ok;
    if (isnan(claimed)) {
        ok = true;
        snprintf(text, sizeof text, "the arm name claims no cap; nothing to check");
    } else if (isnan(measured_w)) {
        ok = false;
        snprintf(text, sizeof text, "the name claims %.0f W but no cap could be read from the card", claimed);
    } else if (fabs(claimed - measured_w) <= 0.5) {
        ok = true;
        snprintf(text, sizeof text, "the name and the card agree at %.0f W", claimed);
    } else {
        ok = false;
        snprintf(text, sizeof text, "the name claims %.0f W but the card is capped at %.1f W", claimed, measured_w);
    }
    set_verdict(v, ok, text);
    return json_pack("{s:s,s:o,s:o,s:s,s:b}", "arm_name", arm ? arm : "", "cap_claimed_by_name_w",
                     isnan(claimed) ? json_null() : json_integer((json_int_t)claimed), "cap_measured_w",
                     watts(measured_w), "verdict", text, "passed", ok);
}

json_t *kiln_service_parse(const char *unit, const char *text, bool disclosed, kiln_verdict *v) {
    json_t *s = json_pack("{s:s}", "unit", unit);
    if (!s) return NULL;
    static const char *const keys[] = {"ActiveState", "UnitFileState", "MainPID", "ExecMainStartTimestamp"};
    const char *p = text ? text : "";
    while (*p) {
        const char *eol = strchr(p, '\n');
        size_t len = eol ? (size_t)(eol - p) : strlen(p);
        const char *eq = memchr(p, '=', len);
        for (size_t k = 0; eq && k < 4; k++) {
            size_t kl = strlen(keys[k]);
            if ((size_t)(eq - p) == kl && !strncmp(p, keys[k], kl)) {
                json_object_set_new(s, keys[k], json_stringn(eq + 1, len - kl - 1));
            }
        }
        p += len + (eol ? 1 : 0);
    }
    const char *state = json_string_value(json_object_get(s, "ActiveState"));
    char vt[256];
    if (!state) {
        set_verdict(v, false, "");
        snprintf(vt, sizeof vt, "%s: systemd gave no ActiveState", unit);
        set_verdict(v, false, vt);
        json_object_set_new(s, "error", json_string(vt));
        return s;
    }
    bool busy = !strcmp(state, "active") || !strcmp(state, "activating") || !strcmp(state, "reloading");
    if (busy && !disclosed)
        snprintf(vt, sizeof vt, "%s is %s (MainPID %s): a competing server may hold the card", unit, state,
                 json_string_value(json_object_get(s, "MainPID")) ? json_string_value(json_object_get(s, "MainPID"))
                                                                   : "?");
    else snprintf(vt, sizeof vt, "%s is %s%s", unit, state, busy ? " (it is the disclosed target)" : "");
    set_verdict(v, !busy || disclosed, vt);
    return s;
}

/* Runs a command line and returns its first 4 KiB of stdout (NULL when it could not run or failed). */
static char *run_capture(const char *cmd) {
    FILE *f = popen(cmd, "r");
    if (!f) return NULL;
    char *buf = kiln_calloc(4097, 1);
    size_t n = buf ? fread(buf, 1, 4096, f) : 0;
    int rc = pclose(f);
    if (!buf || rc != 0) {
        kiln_free(buf);
        return NULL;
    }
    buf[n] = 0;
    return buf;
}

/* Unit and UPS names go into a shell command: allow only the characters such names use. */
static bool safe_name(const char *s) {
    if (!s || !*s || strlen(s) > 200) return false;
    for (const char *p = s; *p; p++)
        if (!isalnum((unsigned char)*p) && !strchr("@._-:", *p)) return false;
    return true;
}

json_t *kiln_service_check(const char *unit, bool disclosed, kiln_verdict *v) {
    char vt[256];
    if (!safe_name(unit)) {
        snprintf(vt, sizeof vt, "unit name \"%.64s\" refused (letters, digits, @._-: only)", unit ? unit : "");
        set_verdict(v, false, vt);
        return json_pack("{s:s,s:s}", "unit", unit ? unit : "", "error", vt);
    }
    char cmd[512];
    snprintf(cmd, sizeof cmd,
             "systemctl show %s -p ActiveState -p UnitFileState -p MainPID -p ExecMainStartTimestamp 2>/dev/null", unit);
    char *out = run_capture(cmd);
    if (!out) {
        snprintf(vt, sizeof vt, "%s: systemctl could not be run or failed", unit);
        set_verdict(v, false, vt);
        return json_pack("{s:s,s:s}", "unit", unit, "error", vt);
    }
    json_t *s = kiln_service_parse(unit, out, disclosed, v);
    kiln_free(out);
    return s;
}

double kiln_ups_parse(const char *text) {
    if (!text) return NAN;
    while (isspace((unsigned char)*text)) text++;
    char *end;
    double d = strtod(text, &end);
    if (end == text) return NAN;
    while (isspace((unsigned char)*end)) end++;
    if (*end || !isfinite(d) || d < 0) return NAN;
    return d;
}

double kiln_ups_check(const char *ups, double stop_pct, kiln_verdict *v) {
    char vt[256];
    if (!ups) {
        set_verdict(v, true, "no UPS named; load not read");
        return NAN;
    }
    if (!safe_name(ups)) {
        snprintf(vt, sizeof vt, "UPS name \"%.64s\" refused (letters, digits, @._-: only)", ups);
        set_verdict(v, false, vt);
        return NAN;
    }
    char cmd[512];
    snprintf(cmd, sizeof cmd, "upsc %s ups.load 2>/dev/null", ups);
    char *out = run_capture(cmd);
    double load = kiln_ups_parse(out);
    kiln_free(out);
    if (isnan(load)) snprintf(vt, sizeof vt, "UPS %s: load unreadable (upsc missing or failed)", ups);
    else if (load >= stop_pct) snprintf(vt, sizeof vt, "UPS %s at %.0f%% load, at or over the %.0f%% stop", ups, load, stop_pct);
    else snprintf(vt, sizeof vt, "UPS %s at %.0f%% load, under the %.0f%% stop", ups, load, stop_pct);
    set_verdict(v, !isnan(load) && load < stop_pct, vt);
    return load;
}
