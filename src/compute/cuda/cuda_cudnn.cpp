/* cuda_cudnn.cpp - attention variant 3: cuDNN's SDPA through its frontend's graph API (see cuda_cudnn.h).
 *
 * One graph per attention shape (sizes, heads, row strides, causal, scale): built, checked and compiled at its
 * first call outside a CUDA-graph capture (that may allocate and synchronise), kept in a small cache, executed on
 * the backend's stream afterwards - also inside a capture, where it records like any kernel. A shape cuDNN
 * refuses is remembered as refused (with cuDNN's reason, logged once) and runs on variant 2 from then on. The
 * frontend throws on a missing symbol: every call into it is inside a try. The CUDA runtime is called directly,
 * not through cuda_rt.cu: the test of kcu_cudnn_check_graph links this file without the rest of the backend. */
#define NV_CUDNN_FRONTEND_USE_DYNAMIC_LOADING
#include <cudnn_frontend.h>
#include <dlfcn.h>

#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

extern "C" {
#include "base/log.h"
#include "compute/cuda/cuda_cudnn.h"
#include "compute/cuda/cuda_internal.h"
}

namespace cudnn_frontend {
void *cudnn_dlhandle = nullptr; /* the frontend's dynamic loading resolves every cuDNN symbol in it */
}
namespace fe = cudnn_frontend;

namespace {

enum uid : int64_t { UID_Q = 1, UID_K, UID_V, UID_O };

struct shape {
    int64_t sq, sk, ldq, ldk, ldv, ldo;
    int hq, hk, dh, causal, sm;
    float scale;
    bool operator==(const shape &o) const { return std::memcmp(this, &o, sizeof o) == 0; }
};

struct plan {
    shape key;
    std::shared_ptr<fe::graph::Graph> graph; /* null: cuDNN refused this shape */
    void *workspace;
    int64_t workspace_bytes;
};

struct state {
    cudnnHandle_t handle = nullptr;
    std::vector<plan> plans; /* oldest first */
};

constexpr size_t MAX_PLANS = 32;
std::mutex load_mu;
std::string load_error; /* set once loading failed: every later open says the same */

/* cuDNN itself, once per process: KILN_CUDNN names the file, else the loader finds libcudnn.so.9 */
kiln_status load(kiln_err *err) {
    std::lock_guard<std::mutex> lock(load_mu);
    if (fe::cudnn_dlhandle) return KILN_OK;
    if (load_error.empty()) {
        const char *name = getenv("KILN_CUDNN");
        if (!name || !*name) name = "libcudnn.so.9";
        void *h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
        if (!h) {
            const char *e = dlerror();
            load_error = std::string("cannot load ") + name + ": " + (e ? e : "?") +
                         " (KILN_CUDNN=path/to/libcudnn.so.9, or its folder on LD_LIBRARY_PATH)";
        } else {
            fe::cudnn_dlhandle = h;
            size_t v = 0;
            try {
                v = fe::detail::get_backend_version();
            } catch (const std::exception &ex) {
                load_error = std::string(name) + ": " + ex.what();
            }
            if (load_error.empty() && v < 90000)
                load_error = std::string(name) + " is cuDNN " + std::to_string(v) + ", older than 9.0";
            if (!load_error.empty()) {
                fe::cudnn_dlhandle = nullptr;
                dlclose(h);
            } else {
                log_info("cuda: cuDNN %zu loaded from %s", v, name);
            }
        }
    }
    if (!load_error.empty()) return KILN_FAIL(err, KILN_E_UNSUPPORTED, "cuDNN: %s", load_error.c_str());
    return KILN_OK;
}

/* Q [1, hq, sq, dh] over kiln's row-major [sq, hq * dh] (row stride ld), and likewise K, V and O: one head is a
 * column block, so a head's stride is dh and a token's is ld */
std::shared_ptr<fe::graph::Tensor_attributes> bshd(fe::graph::Graph &g, const char *name, int64_t uid, int64_t s,
                                                   int64_t h, int64_t dh, int64_t ld) {
    return g.tensor(fe::graph::Tensor_attributes()
                        .set_name(name)
                        .set_uid(uid)
                        .set_dim({1, h, s, dh})
                        .set_stride({s * ld, dh, ld, 1}));
}

/* The graph for one shape, validated for sm (the frontend's own support checks; no GPU needed) */
kiln_status make_graph(const shape &k, std::shared_ptr<fe::graph::Graph> *out, kiln_err *err) {
    auto g = std::make_shared<fe::graph::Graph>();
    g->set_io_data_type(fe::DataType_t::BFLOAT16)
        .set_intermediate_data_type(fe::DataType_t::FLOAT)
        .set_compute_data_type(fe::DataType_t::FLOAT)
        .set_sm_version(k.sm);
    auto q = bshd(*g, "Q", UID_Q, k.sq, k.hq, k.dh, k.ldq);
    auto kk = bshd(*g, "K", UID_K, k.sk, k.hk, k.dh, k.ldk);
    auto v = bshd(*g, "V", UID_V, k.sk, k.hk, k.dh, k.ldv);
    auto opt = fe::graph::SDPA_attributes().set_name("kiln_attention").set_generate_stats(false).set_attn_scale(k.scale);
    if (k.causal) opt.set_causal_mask(true); /* top-left: query i sees keys 0..i, kiln's rule */
    auto outs = g->sdpa(q, kk, v, opt);
    outs[0]->set_output(true).set_uid(UID_O).set_dim({1, k.hq, k.sq, k.dh}).set_stride({k.sq * k.ldo, k.dh, k.ldo, 1});
    auto st = g->validate();
    if (!st.is_good()) return KILN_FAIL(err, KILN_E_UNSUPPORTED, "cuDNN SDPA: %s", st.get_message().c_str());
    *out = g;
    return KILN_OK;
}

/* validate, then the backend graph, the heuristics' plans, the support check and the compiled plan */
kiln_status build(state *s, const shape &k, plan *p, kiln_err *err) {
    std::shared_ptr<fe::graph::Graph> g;
    KILN_TRY(make_graph(k, &g, err));
    const char *step = "build_operation_graph";
    auto st = g->build_operation_graph(s->handle);
    if (st.is_good()) step = "create_execution_plans", st = g->create_execution_plans({fe::HeurMode_t::A});
    if (st.is_good()) step = "check_support", st = g->check_support(s->handle);
    if (st.is_good()) step = "build_plans", st = g->build_plans(s->handle);
    if (!st.is_good()) return KILN_FAIL(err, KILN_E_UNSUPPORTED, "cuDNN SDPA %s: %s", step, st.get_message().c_str());
    int64_t ws = 0;
    st = g->get_workspace_size(ws);
    if (!st.is_good()) return KILN_FAIL(err, KILN_E_DEVICE, "cuDNN SDPA workspace: %s", st.get_message().c_str());
    p->workspace = nullptr;
    if (ws > 0 && cudaMalloc(&p->workspace, (size_t)ws) != cudaSuccess)
        return KILN_FAIL(err, KILN_E_NOMEM, "cuDNN SDPA: no device memory for a %lld-byte workspace", (long long)ws);
    p->workspace_bytes = ws;
    p->graph = g;
    return KILN_OK;
}

state *state_of(kiln_cuda_backend *cb) { return static_cast<state *>(cb->cudnn); }

} // namespace

extern "C" kiln_status kcu_cudnn_open(kiln_cuda_backend *cb, kiln_err *err) {
    KILN_TRY(load(err));
    try {
        auto s = std::make_unique<state>();
        cudnnStatus_t rc = fe::detail::create_handle(&s->handle);
        if (rc != CUDNN_STATUS_SUCCESS)
            return KILN_FAIL(err, KILN_E_DEVICE, "cuDNN: cudnnCreate: %s", fe::detail::get_error_string(rc));
        rc = fe::detail::set_stream(s->handle, static_cast<cudaStream_t>(cb->stream));
        if (rc != CUDNN_STATUS_SUCCESS) {
            fe::detail::destroy_handle(s->handle);
            return KILN_FAIL(err, KILN_E_DEVICE, "cuDNN: cudnnSetStream: %s", fe::detail::get_error_string(rc));
        }
        cb->cudnn = s.release();
    } catch (const std::exception &ex) {
        return KILN_FAIL(err, KILN_E_DEVICE, "cuDNN: %s", ex.what());
    }
    return KILN_OK;
}

extern "C" void kcu_cudnn_close(kiln_cuda_backend *cb) {
    state *s = state_of(cb);
    if (!s) return;
    try {
        for (plan &p : s->plans) cudaFree(p.workspace);
        s->plans.clear();
        if (s->handle) fe::detail::destroy_handle(s->handle);
    } catch (const std::exception &ex) {
        log_warn("cuda: cuDNN at close: %s", ex.what());
    }
    delete s;
    cb->cudnn = nullptr;
}

extern "C" kiln_status kcu_cudnn_attention(kiln_cuda_backend *cb, const kcu_mat *out, const kcu_mat *q,
                                           const kcu_mat *k, const kcu_mat *v, int n_q_heads, int n_kv_heads,
                                           float scale, bool causal, kiln_err *err) {
    state *s = state_of(cb);
    if (!s) return KILN_FAIL(err, KILN_E_UNSUPPORTED, "cuDNN is not open on this backend");
    const char *why = kcu_cudnn_attention_refusal(out, q, k, v, n_q_heads, n_kv_heads, causal, false, false);
    if (why) return KILN_FAIL(err, KILN_E_UNSUPPORTED, "cuDNN SDPA: %s", why);
    shape key;
    std::memset(&key, 0, sizeof key); /* compared bytewise: the padding too */
    key.sq = q->rows, key.sk = k->rows, key.ldq = q->ld, key.ldk = k->ld, key.ldv = v->ld, key.ldo = out->ld;
    key.hq = n_q_heads, key.hk = n_kv_heads, key.dh = (int)(q->cols / n_q_heads), key.causal = causal ? 1 : 0;
    key.sm = cb->cc_major * 10 + cb->cc_minor, key.scale = scale;
    try {
        plan *p = nullptr;
        for (plan &c : s->plans)
            if (c.key == key) p = &c;
        if (!p) {
            /* a first build may allocate and synchronise: not inside a capture (variant 2 takes that call) */
            if (cb->capturing) return KILN_FAIL(err, KILN_E_UNSUPPORTED, "cuDNN SDPA: a new shape inside a capture");
            if (s->plans.size() >= MAX_PLANS) { /* the oldest goes; its workspace may be in use until a sync */
                cudaError_t e = cudaStreamSynchronize(static_cast<cudaStream_t>(cb->stream));
                if (e != cudaSuccess) return KILN_FAIL(err, KILN_E_DEVICE, "cuDNN SDPA: %s", cudaGetErrorString(e));
                cudaFree(s->plans.front().workspace);
                s->plans.erase(s->plans.begin());
            }
            plan np{key, nullptr, nullptr, 0};
            kiln_err why_err = {};
            kiln_status bs = build(s, key, &np, &why_err);
            if (bs != KILN_OK && bs != KILN_E_UNSUPPORTED) {
                if (err) *err = why_err;
                return bs;
            }
            if (bs != KILN_OK)
                log_info("cuda: attention %lld x %lld keys, %d/%d heads of %d%s: %s; variant 2 runs it", (long long)key.sq,
                         (long long)key.sk, key.hq, key.hk, key.dh, causal ? ", causal" : "", why_err.msg);
            s->plans.push_back(np);
            p = &s->plans.back();
        }
        if (!p->graph) return KILN_FAIL(err, KILN_E_UNSUPPORTED, "cuDNN SDPA refused this shape");
        std::unordered_map<int64_t, void *> ptrs = {
            {UID_Q, q->data}, {UID_K, k->data}, {UID_V, v->data}, {UID_O, out->data}};
        auto st = p->graph->execute(s->handle, ptrs, p->workspace);
        if (!st.is_good()) return KILN_FAIL(err, KILN_E_DEVICE, "cuDNN SDPA execute: %s", st.get_message().c_str());
    } catch (const std::exception &ex) {
        return KILN_FAIL(err, KILN_E_DEVICE, "cuDNN SDPA: %s", ex.what());
    }
    return KILN_OK;
}

/* For tests/unit/test_compute_cuda_cudnn.c: load cuDNN and validate the graph kiln would build for this shape on
 * sm - the frontend's support checks, no GPU. */
extern "C" kiln_status kcu_cudnn_check_graph(int sm, int64_t sq, int64_t sk, int hq, int hk, int dh, int64_t ld_q,
                                             int64_t ld_kv, bool causal, float scale, kiln_err *err) {
    KILN_TRY(load(err));
    shape key;
    std::memset(&key, 0, sizeof key);
    key.sq = sq, key.sk = sk, key.ldq = ld_q, key.ldk = ld_kv, key.ldv = ld_kv, key.ldo = ld_q;
    key.hq = hq, key.hk = hk, key.dh = dh, key.causal = causal ? 1 : 0, key.sm = sm, key.scale = scale;
    try {
        std::shared_ptr<fe::graph::Graph> g;
        return make_graph(key, &g, err);
    } catch (const std::exception &ex) {
        return KILN_FAIL(err, KILN_E_DEVICE, "cuDNN SDPA: %s", ex.what());
    }
}
