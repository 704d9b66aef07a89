/* report_shapes.c - the report schema as tables: every field of the three seed reports and of kiln's own
 * reports, with its type and whether it is required. docs/bench-report.md is the prose of these tables; keep
 * the two together. Fields marked "kiln" are written by kiln's harness and optional when reading others. */
#include "bench/report.h"

#define NUM_OR_NULL (KILN_T_NUM | KILN_T_NULL)
#define STR_OR_NULL (KILN_T_STR | KILN_T_NULL)
#define INT_OR_NULL (KILN_T_INT | KILN_T_NULL)

static const kiln_shape any = {KILN_T_ANY, 0, 0, 0};
static const kiln_shape str = {KILN_T_STR, 0, 0, 0};
static const kiln_shape str_or_null = {STR_OR_NULL, 0, 0, 0};
static const kiln_shape num = {KILN_T_NUM, 0, 0, 0};
static const kiln_shape num_or_null = {NUM_OR_NULL, 0, 0, 0};
static const kiln_shape integer = {KILN_T_INT, 0, 0, 0};
static const kiln_shape int_or_null = {INT_OR_NULL, 0, 0, 0};
static const kiln_shape boolean = {KILN_T_BOOL, 0, 0, 0};
static const kiln_shape free_obj = {KILN_T_OBJ, 0, 0, 0};
static const kiln_shape arr_str = {KILN_T_ARR, 0, &str, 0};
static const kiln_shape arr_num = {KILN_T_ARR, 0, &num, 0};
static const kiln_shape arr_any = {KILN_T_ARR, 0, &any, 0};
static const kiln_shape map_str = {KILN_T_OBJ, 0, &str, true};
static const kiln_shape map_num_or_null = {KILN_T_OBJ, 0, &num_or_null, true};
static const kiln_shape map_any = {KILN_T_OBJ, 0, &any, true};

/* ---- reductions and telemetry ---------------------------------------------------------------------------- */

static const kiln_field reduction_f[] = {
    {"n", &integer, true},      {"min", &num_or_null, true}, {"median", &num_or_null, true},
    {"max", &num_or_null, true}, {"mean", &num_or_null, true}, {0},
};
static const kiln_shape reduction = {KILN_T_OBJ, reduction_f, 0, 0};

static const kiln_field throttle_f[] = {
    {"sw_power_cap", &num_or_null, false},
    {"hw_slowdown", &num_or_null, false},
    {"sw_thermal_slowdown", &num_or_null, false},
    {"hw_thermal_slowdown", &num_or_null, false},
    {"hw_power_brake_slowdown", &num_or_null, false}, /* kiln */
    {"sync_boost", &num_or_null, false},              /* kiln */
    {"source", &map_str, false},                      /* kiln: per reason "counter" | "sampled" | "unsupported" */
    {0},
};
static const kiln_shape throttle = {KILN_T_OBJ, throttle_f, 0, 0};

static const kiln_field telemetry_f[] = {
    {"samples", &integer, true},
    {"power.draw", &reduction, false},
    {"memory.used", &reduction, false},
    {"temperature.gpu", &reduction, false},
    {"fan.speed", &reduction, false},
    {"clocks.sm", &reduction, false},
    {"clocks.mem", &reduction, false},
    {"pcie.link.width.current", &reduction, false},
    {"pcie.link.gen.current", &reduction, false},
    {"power.limit", &reduction, false},
    {"enforced.power.limit", &reduction, false},
    {"utilization.gpu", &reduction, false},    /* kiln */
    {"throttle", &throttle, false},
    {"energy_j", &num_or_null, false},         /* kiln: delta of the millijoule counter over the window */
    {"window_s", &num_or_null, false},         /* kiln */
    {"available", &boolean, false},            /* kiln: false when NVML could not be used */
    {"why", &str, false},                      /* kiln: why telemetry is unavailable */
    {"series", &free_obj, false},              /* kiln: the raw trace for plots {t: [...], <field>: [...]} */
    {0},
};
static const kiln_shape telemetry = {KILN_T_OBJ, telemetry_f, 0, 0};
static const kiln_shape map_telemetry = {KILN_T_OBJ, 0, &telemetry, true};

/* ---- preflight ------------------------------------------------------------------------------------------- */

static const kiln_field service_f[] = {
    {"ActiveState", &str, false},   {"UnitFileState", &str, false}, {"MainPID", &str, false},
    {"ExecMainStartTimestamp", &str, false}, {"unit", &str, true}, {"read_at", &str, false},
    {"error", &str, false}, /* kiln: why the unit could not be read */
    {0},
};
static const kiln_shape service = {KILN_T_OBJ | KILN_T_NULL, service_f, 0, 0};

static const kiln_field process_f[] = {
    {"pid", &integer, true}, {"used_mib", &num_or_null, false}, {"name", &str_or_null, false},
    {"uuid", &str_or_null, false}, {0},
};
static const kiln_shape process = {KILN_T_OBJ | KILN_T_INT, process_f, 0, 0};
static const kiln_shape arr_process = {KILN_T_ARR, 0, &process, 0};

static const kiln_field attempt_f[] = {
    {"window_s", &num, true},
    {"samples", &integer, true},
    {"card_seen", &boolean, false},
    {"readings", &integer, true},
    {"utilization_pct", &reduction, true},
    {"memory_used_mib", &reduction, false},
    {"power_w", &reduction, false},
    {"attempt", &integer, true},
    {"verdict", &str, true},
    {"quiet", &boolean, false}, /* kiln */
    {"driver_samples", &reduction, false}, /* kiln: nvmlDeviceGetSamples utilization over the window */
    {"judged_on", &str, false},            /* kiln: "driver samples" | "polled readings" */
    {0},
};
static const kiln_shape attempt = {KILN_T_OBJ, attempt_f, 0, 0};
static const kiln_shape arr_attempt = {KILN_T_ARR, 0, &attempt, 0};

static const kiln_field gate_f[] = {
    {"max_util_pct", &num, true}, {"window_s", &num, true},     {"attempts", &arr_attempt, true},
    {"passed", &boolean, true},   {"samples", &integer, false}, /* kiln */
    {"max_attempts", &integer, false},                          /* kiln */
    {"verdict", &str, false},                                   /* kiln */
    {"applicable", &boolean, false},                            /* kiln: false when no telemetry can run it */
    {0},
};
static const kiln_shape gate = {KILN_T_OBJ, gate_f, 0, 0};

static const kiln_field card_available_f[] = {
    {"at", &str, true},
    {"service", &service, false},
    {"service_main_pid", &int_or_null, false},
    {"disclosed", &arr_process, true},
    {"unexpected", &arr_process, true},
    {"disclosed_mib", &num, false},
    {"clear", &boolean, true},
    {"contention_gate", &gate, true},
    {"verdict", &str, false}, /* kiln */
    {0},
};
static const kiln_shape card_available = {KILN_T_OBJ, card_available_f, 0, 0};

static const kiln_field limits_f[] = {
    {"power.limit", &num_or_null, false},         {"enforced.power.limit", &num_or_null, false},
    {"power.default_limit", &num_or_null, false}, {"power.min_limit", &num_or_null, false},
    {"power.max_limit", &num_or_null, false},     {0},
};
static const kiln_shape limits = {KILN_T_OBJ, limits_f, 0, 0};
static const kiln_shape map_limits = {KILN_T_OBJ, 0, &limits, true};

static const kiln_field cap_f[] = {
    {"per_card_w", &map_num_or_null, true},
    {"per_card_field", &map_str, true},
    {"at", &str, true},
    {"agree", &boolean, true},
    {"w", &num_or_null, true},
    {"field", &str_or_null, true},
    {"cap_field_note", &str, false},
    {"per_card_limits_w", &map_limits, false}, /* kiln: every limit the board answered */
    {"why", &str, false},                      /* kiln: why no cap could be read */
    {0},
};
static const kiln_shape cap = {KILN_T_OBJ, cap_f, 0, 0};

static const kiln_field check_f[] = {
    {"name", &str, true}, {"passed", &boolean, true}, {"verdict", &str, true}, {0},
};
static const kiln_shape check = {KILN_T_OBJ, check_f, 0, 0};
static const kiln_shape arr_check = {KILN_T_ARR, 0, &check, 0};

static const kiln_field preflight_f[] = {
    {"card_available", &card_available, true},
    {"cap", &cap, true},
    {"ups_load_pct_at_start", &num_or_null, false},
    {"ups_stop_pct", &num_or_null, false},
    {"power_posture", &str, false},
    {"idle_baseline", &map_telemetry, false},
    {"checks", &arr_check, false}, /* kiln: every preflight check with its verdict */
    {0},
};
static const kiln_shape preflight = {KILN_T_OBJ, preflight_f, 0, 0};

/* ---- graphs, cards, batches, submits --------------------------------------------------------------------- */

static const kiln_field knobs_f[] = {
    {"steps", &integer, true}, {"cfg", &num, true},        {"sampler", &str, true},
    {"width", &integer, true}, {"height", &integer, true}, {"batch_size", &integer, true},
    {"unet", &str, true},      {"clip", &str, true},       {"vae", &str, true},
    {"pixelize", &integer, false}, /* kiln: pixelize factor when the graph has the post-process node */
    {0},
};
static const kiln_shape knobs = {KILN_T_OBJ, knobs_f, 0, 0};

static const kiln_field reference_f[] = {
    {"n", &integer, false},
    {"median", &num_or_null, false},
    {"min", &num_or_null, false},
    {"max", &num_or_null, false},
    {"cold_excluded", &arr_num, false},
    {"same_graph_reference", &str_or_null, true},
    {"why", &str, false},
    {0},
};
static const kiln_shape reference = {KILN_T_OBJ, reference_f, 0, 0};

static const kiln_field image_f[] = {
    {"filename", &str, true},     {"subfolder", &str, false},  {"type", &str, false},
    {"pixel_sha256", &str, false}, /* kiln: sha256 of the decoded RGB8 pixels */
    {"width", &integer, false},   {"height", &integer, false}, {"bytes", &integer, false}, {0},
};
static const kiln_shape image = {KILN_T_OBJ, image_f, 0, 0};
static const kiln_shape arr_image = {KILN_T_ARR, 0, &image, 0};

static const kiln_field stage_f[] = {{"name", &str, true}, {"duration_ms", &num, true}, {0}};
static const kiln_shape stage = {KILN_T_OBJ, stage_f, 0, 0};
static const kiln_shape arr_stage = {KILN_T_ARR, 0, &stage, 0};

static const kiln_field submit_f[] = {
    {"prompt_id", &str, true},
    {"exec_seconds", &num, true},
    {"wall_seconds", &num, true},
    {"n_images", &integer, true},
    {"exec_seconds_per_image", &num, true},
    {"images", &arr_image, true},
    {"started_at", &str, false},
    {"tag", &str, false},
    {"index", &integer, true},
    {"cell", &str, true},
    {"cell_workflow", &str_or_null, false},
    {"seed", &integer, true},
    {"batch_size", &integer, true},
    {"cell_reference_seconds", &num_or_null, false},
    {"t0", &num, true},
    {"t1", &num, true},
    {"saved", &arr_str, false},
    {"stages", &arr_stage, false},  /* kiln */
    {"outlier", &boolean, false},   /* kiln: flagged by the modified z-score, kept */
    {0},
};
static const kiln_shape submit = {KILN_T_OBJ, submit_f, 0, 0};
static const kiln_shape arr_submit = {KILN_T_ARR, 0, &submit, 0};

static const kiln_field reduced_f[] = {
    {"submits", &integer, true},
    {"images", &integer, true},
    {"exec_seconds_per_submit", &reduction, true},
    {"exec_seconds_per_image", &reduction, true},
    {"wall_seconds_for_the_run", &num_or_null, true},
    {"images_per_minute_wall", &num_or_null, true},
    {"exec_seconds_per_image_ci", &free_obj, false}, /* kiln: {lo, hi, confidence} */
    {0},
};
static const kiln_shape reduced = {KILN_T_OBJ, reduced_f, 0, 0};

static const kiln_field ratio_f[] = {
    {"ratio", &num, true},          {"reference_median", &num, true}, {"cap_w", &num_or_null, true},
    {"graph_digest", &str, true},   {"batch_size", &integer, true},   {"source", &str, false}, {0},
};
static const kiln_shape ratio = {KILN_T_OBJ, ratio_f, 0, 0};
static const kiln_shape map_ratio = {KILN_T_OBJ, 0, &ratio, true};

static const kiln_field batch_f[] = {
    {"warmup", &arr_submit, true},
    {"cold_first_submit_exec_seconds", &num_or_null, true},
    {"cold_measured", &boolean, true},
    {"timed", &arr_submit, true},
    {"reduced", &reduced, true},
    {"trace", &telemetry, true},
    {"ratio_vs_references", &map_ratio, true},
    {"references_withheld", &map_str, true},
    {0},
};
static const kiln_shape batch = {KILN_T_OBJ, batch_f, 0, 0};
static const kiln_shape map_batch = {KILN_T_OBJ, 0, &batch, true};

static const kiln_field card_f[] = {
    {"index", &integer, true},
    {"uuid", &str_or_null, true},
    {"board", &str_or_null, false},
    {"slot", &str_or_null, false},
    {"bus_id", &str_or_null, false},
    {"port", &int_or_null, false},
    {"cap_w", &num_or_null, true},
    {"batches", &map_batch, true},
    {"process_start_seconds_wall", &num_or_null, false},
    {"system_stats", &arr_any, false},
    {0},
};
static const kiln_shape card = {KILN_T_OBJ, card_f, 0, 0};
static const kiln_shape map_card = {KILN_T_OBJ, 0, &card, true};

static const kiln_field graph_f[] = {
    {"graph_digest", &str, true},
    {"file_digest", &str, true},
    {"receipt", &map_str, false},
    {"knobs", &knobs, true},
    {"prompt_cells", &arr_str, true},
    {"reference", &reference, false},
    {"cards", &map_card, true},
    {"partial", &boolean, true},
    {"file", &str, false}, /* kiln: the graph file as given */
    {0},
};
static const kiln_shape graph = {KILN_T_OBJ, graph_f, 0, 0};
static const kiln_shape map_graph = {KILN_T_OBJ, 0, &graph, true};

static const kiln_field refusal_f[] = {{"check", &str, true}, {"verdict", &str, true}, {0}};
static const kiln_shape refusal = {KILN_T_OBJ | KILN_T_STR, refusal_f, 0, 0};
static const kiln_shape arr_refusal = {KILN_T_ARR, 0, &refusal, 0};

static const kiln_field cap_name_f[] = {
    {"arm_name", &str, true},           {"cap_claimed_by_name_w", &num_or_null, true},
    {"cap_measured_w", &num_or_null, true}, {"at", &str, false},
    {"verdict", &str, true},            {"passed", &boolean, false}, /* kiln */
    {0},
};
static const kiln_shape cap_name = {KILN_T_OBJ, cap_name_f, 0, 0};

static const kiln_field cap_rung_f[] = {{"registered", &boolean, true}, {"ladder", &arr_num, true}, {0}};
static const kiln_shape cap_rung = {KILN_T_OBJ, cap_rung_f, 0, 0};

static const kiln_field seats_f[] = {{"usable", &arr_str, true}, {"withheld", &map_str, true}, {0}};
static const kiln_shape seats = {KILN_T_OBJ, seats_f, 0, 0};

static const kiln_field tool_f[] = {{"name", &str, true}, {"version", &str, true}, {0}};
static const kiln_shape tool = {KILN_T_OBJ, tool_f, 0, 0};

static const kiln_field target_f[] = {
    {"kind", &str, true}, {"url", &str_or_null, false}, {"describe", &str_or_null, false}, {0},
};
static const kiln_shape target = {KILN_T_OBJ, target_f, 0, 0};

static const kiln_field telemetry_status_f[] = {
    {"available", &boolean, true}, {"why", &str_or_null, false}, {"library", &str_or_null, false},
    {"driver", &str_or_null, false}, {"period_s", &num, false}, {0},
};
static const kiln_shape telemetry_status = {KILN_T_OBJ, telemetry_status_f, 0, 0};

static const kiln_field spi_f[] = {
    {"schema", &str, false}, /* kiln: "kiln-bench-report/1" */
    {"kind", &str, false},   /* kiln: "seconds-per-image" */
    {"tool", &tool, false},
    {"target", &target, false},
    {"telemetry", &telemetry_status, false},
    {"question", &str, true},
    {"prompt_bank", &str, true},
    {"prompt_bank_digest", &str, false},
    {"batch_n_from_print_lab", &integer, false},
    {"warmup_images", &integer, true},
    {"timed_images", &integer, true},
    {"preflight", &preflight, true},
    {"graphs", &map_graph, true},
    {"refusals", &arr_refusal, true},
    {"cap_name_check", &cap_name, true},
    {"cap_rung", &cap_rung, false},
    {"reference_seats_at_this_cap", &seats, false},
    {"arm", &str, true},
    {"at", &str, true},
    {"model_digests", &map_any, true},
    {"run_seconds_wall", &num, false}, /* kiln: the whole run, preflight included */
    {0},
};
static const kiln_shape spi = {KILN_T_OBJ, spi_f, 0, 0};

/* ---- A/B/B/A (seed 001) ---------------------------------------------------------------------------------- */

static const kiln_field row_f[] = {
    {"cell", &str, true},
    {"source_commit", &str, false},
    {"side", &str, true},
    {"engine_e2e_s", &num, true},
    {"denoise_s", &num_or_null, false},
    {"peak_reserved_gib", &num_or_null, false},
    {"output", &str, false},
    {"output_sha256", &str, true},
    {"stages", &arr_stage, true},
    {"round", &integer, false},     /* kiln */
    {"wall_s", &num, false},        /* kiln */
    {"outlier", &boolean, false},   /* kiln */
    {"outlier_stages", &arr_str, false}, /* kiln */
    {0},
};
static const kiln_shape row = {KILN_T_OBJ, row_f, 0, 0};
static const kiln_shape arr_row = {KILN_T_ARR, 0, &row, 0};
static const kiln_shape summary = {KILN_T_OBJ, 0, &map_num_or_null, true};

static const kiln_field abba_f[] = {
    {"schema", &str, false},
    {"kind", &str, false},
    {"tool", &tool, false},
    {"scope", &str, true},
    {"model", &str, false},
    {"checkpoint", &str, false},
    {"environment", &map_any, false},
    {"timing_definition", &str, false},
    {"retained_outlier", &str, false},
    {"summary", &summary, true},
    {"rows", &arr_row, true},
    {"sides", &map_any, false},         /* kiln: what a and b are */
    {"ratio_of_medians", &free_obj, false}, /* kiln */
    {"identical_outputs", &str, false}, /* kiln: "yes" | "no" */
    {0},
};
static const kiln_shape abba = {KILN_T_OBJ, abba_f, 0, 0};

/* ---- variants with lifecycle medians (seed 002) ---------------------------------------------------------- */

/* kiln: one request of a cycle, seconds from its submit (variants.h) */
static const kiln_field vreq_f[] = {
    {"index", &integer, true},          {"prompt_id", &str, true},          {"t0", &num, true},
    {"queued_s", &num_or_null, true},   {"running_s", &num_or_null, true},  {"done_s", &num_or_null, true},
    {"http_s", &num_or_null, true},     {"saved_validated_s", &num_or_null, true},
    {"stage_gen_s", &num_or_null, true}, {"vae_s", &num_or_null, true},     {"ok", &boolean, true},
    {"error", &str_or_null, true},      {0},
};
static const kiln_shape vreq = {KILN_T_OBJ, vreq_f, 0, 0};
static const kiln_shape arr_vreq = {KILN_T_ARR, 0, &vreq, 0};
static const kiln_field lifecycle_f[] = {
    {"submit_to_queued", &num_or_null, true}, {"queued_to_running", &num_or_null, true},
    {"running_to_done", &num_or_null, true},  {"done_to_http", &num_or_null, true},
    {"http_to_saved_validated", &num_or_null, true}, {0},
};
static const kiln_shape lifecycle = {KILN_T_OBJ, lifecycle_f, 0, 0};

static const kiln_field cycle_f[] = {
    {"hardware", &str, false},
    {"variant", &str, true},
    {"cycle", &integer, true},
    {"case", &str, false},
    {"n", &integer, true},
    {"complete_cell", &boolean, false},
    {"http_median_s", &num, true},
    {"saved_validated_median_s", &num_or_null, false},
    {"stage_gen_median_s", &num_or_null, false},
    {"lifecycle_medians_s", &lifecycle, false}, /* kiln */
    {"requests", &arr_vreq, false},             /* kiln: the measured requests */
    {"warmup", &arr_vreq, false},               /* kiln: the warm-up requests (not reduced) */
    {0},
};
static const kiln_shape cycle = {KILN_T_OBJ, cycle_f, 0, 0};
static const kiln_shape arr_cycle = {KILN_T_ARR, 0, &cycle, 0};
static const kiln_field vae_rec_f[] = {{"cycle", &integer, true}, {"vae_s", &num, true}, {0}};
static const kiln_shape vae_rec = {KILN_T_OBJ, vae_rec_f, 0, 0};
static const kiln_shape arr_vae_rec = {KILN_T_ARR, 0, &vae_rec, 0};
static const kiln_field variant_f[] = {
    {"variant", &str, true},
    {"target", &target, false}, /* kiln */
    {"http_cycles", &arr_cycle, true},
    {"http_median_of_lifecycle_medians_s", &num, true},
    {"vae_median_s", &num_or_null, false},
    {"vae_stage_records", &arr_vae_rec, false},
    {0},
};
static const kiln_shape variant = {KILN_T_OBJ, variant_f, 0, 0};
static const kiln_shape arr_variant = {KILN_T_ARR, 0, &variant, 0};
static const kiln_field variants_f[] = {
    {"schema", &str, false},       {"kind", &str, false},           {"tool", &tool, false}, /* kiln */
    {"at", &str, false},           {"config", &free_obj, false},    /* kiln: graph, digests, cycles, requests... */
    {"scope", &str, true},         {"execution", &str, false},      {"aggregation", &str, false},
    {"source_sha256", &str, false}, {"results", &arr_variant, true}, {0},
};
static const kiln_shape variants = {KILN_T_OBJ, variants_f, 0, 0};

/* ---- serve-load (`kiln bench serve`) ---------------------------------------------------------------------- */


static const kiln_field pct_f[] = {
    {"n", &integer, true},         {"min", &num_or_null, true}, {"p50", &num_or_null, true},
    {"p90", &num_or_null, true},   {"p99", &num_or_null, true}, {"max", &num_or_null, true},
    {"mean", &num_or_null, true},  {0},
};
static const kiln_shape pct = {KILN_T_OBJ, pct_f, 0, 0};

static const kiln_field sl_config_f[] = {
    {"api", &str, true},           {"graph", &str_or_null, true},    {"model", &str_or_null, true},
    {"prompts_file", &str_or_null, true}, {"prompt_count", &integer, true}, {"requests", &integer, true},
    {"arrival", &str, true},       {"loads", &arr_num, true},        {"sizes", &arr_str, true},
    {"steps", &arr_num, true},     {"seed", &integer, true},         {"warmup", &integer, true},
    {"slo_scale", &num, true},     {"timeout_s", &num, true},        {"max_in_flight", &integer, true},
    {0},
};
static const kiln_shape sl_config = {KILN_T_OBJ, sl_config_f, 0, 0};

static const kiln_field sl_warm_f[] = {
    {"index", &integer, true},  {"width", &integer, true},   {"height", &integer, true}, {"steps", &integer, true},
    {"latency_s", &num, true},  {"ok", &boolean, true},      {"error", &str_or_null, true},
    {"unit_s", &num_or_null, true}, {0},
};
static const kiln_shape sl_warm = {KILN_T_OBJ, sl_warm_f, 0, 0};
static const kiln_shape arr_sl_warm = {KILN_T_ARR, 0, &sl_warm, 0};

static const kiln_field sl_baseline_f[] = {
    {"requests", &arr_sl_warm, true}, {"unit_s", &num, true}, {"definition", &str, false}, {0},
};
static const kiln_shape sl_baseline = {KILN_T_OBJ, sl_baseline_f, 0, 0};

static const kiln_field sl_req_f[] = {
    {"index", &integer, true},       {"scheduled_s", &num, true},      {"sent_s", &num, true},
    {"done_s", &num, true},          {"latency_s", &num, true},        {"exec_s", &num_or_null, true},
    {"queue_wait_s", &num_or_null, true}, {"width", &integer, true},   {"height", &integer, true},
    {"steps", &integer, true},       {"prompt_index", &integer, true}, {"seed", &integer, true},
    {"ok", &boolean, true},          {"error", &str_or_null, true},    {"id", &str, true},
    {"deadline_s", &num_or_null, true}, {"slo_met", &boolean, true},   {0},
};
static const kiln_shape sl_req = {KILN_T_OBJ, sl_req_f, 0, 0};
static const kiln_shape arr_sl_req = {KILN_T_ARR, 0, &sl_req, 0};

static const kiln_field sl_slo_f[] = {
    {"scale", &num, true}, {"unit_s", &num_or_null, true}, {"met", &integer, true}, {"total", &integer, true},
    {"attainment", &num_or_null, true}, {0},
};
static const kiln_shape sl_slo = {KILN_T_OBJ, sl_slo_f, 0, 0};

static const kiln_field sl_summary_f[] = {
    {"sent", &integer, true},          {"completed", &integer, true},      {"errors", &integer, true},
    {"error_messages", &arr_str, true}, {"duration_s", &num, true},        {"offered_rps", &num_or_null, true},
    {"throughput_rps", &num_or_null, true}, {"latency_s", &pct, true},     {"queue_wait_s", &pct, true},
    {"exec_s", &pct, true},            {"max_send_lag_s", &num, true},     {"slo", &sl_slo, true},
    {0},
};
static const kiln_shape sl_summary = {KILN_T_OBJ, sl_summary_f, 0, 0};

static const kiln_field sl_run_f[] = {
    {"label", &str, true},          {"arrival", &str, true},        {"rate_rps", &num_or_null, true},
    {"concurrency", &int_or_null, true}, {"requests", &arr_sl_req, true}, {"summary", &sl_summary, true},
    {0},
};
static const kiln_shape sl_run = {KILN_T_OBJ, sl_run_f, 0, 0};
static const kiln_shape arr_sl_run = {KILN_T_ARR, 0, &sl_run, 0};

static const kiln_field serve_load_f[] = {
    {"schema", &str, true},   {"kind", &str, true},          {"tool", &tool, true},
    {"at", &str, true},       {"target", &target, true},     {"config", &sl_config, true},
    {"baseline", &sl_baseline, true}, {"runs", &arr_sl_run, true}, {"run_seconds_wall", &num, false},
    {0},
};
static const kiln_shape serve_load = {KILN_T_OBJ, serve_load_f, 0, 0};

const kiln_shape *kiln_report_shape(kiln_report_kind kind) {
    switch (kind) {
    case KILN_REPORT_SECONDS_PER_IMAGE: return &spi;
    case KILN_REPORT_ABBA: return &abba;
    case KILN_REPORT_VARIANTS: return &variants;
    case KILN_REPORT_SERVE_LOAD: return &serve_load;
    }
    return &any;
}
