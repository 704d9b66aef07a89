/* engine_internal.h - the kiln_engine struct shared by the pipeline's files (not public). */
#ifndef KILN_PIPELINE_ENGINE_INTERNAL_H
#define KILN_PIPELINE_ENGINE_INTERNAL_H

#include <pthread.h>

#include "kiln.h"
#include "compute/comm.h"
#include "compute/ops.h"
#include "io/safetensors.h"
#include "models/flux2_dit.h"
#include "models/flux2_vae.h"
#include "models/lora.h"
#include "models/qwen3.h"
#include "pipeline/mem_agree.h"
#include "pipeline/schedule.h"
#include "text/tokenizer.h"

struct kiln_engine {
    pthread_mutex_t lock;
    kiln_engine_config cfg;      /* strings below are owned copies */
    char *model_dir, *unet_path, *clip_path, *vae_path, *tokenizer_dir, *commit;
    char te_path[4096], te_config[4096], dit_path[4096], dit_config[4096], vae_file[4096];
    char vae_config[4096], sched_config[4096]; /* "" when the layout has none (single files) */
    kiln_variant variant;
    bool kv;                     /* model_index.json names Flux2KleinKVPipeline (klein 9B-KV: models/dit_kv.h) */
    kiln_sched_config sched;     /* scheduler/scheduler_config.json, else klein's */
    kiln_backend *be;
    kiln_comm *comm;             /* the ranks running each request together (one rank unless under mpirun) */
    kiln_comm *grid_sp, *grid_tp; /* cfg.tp > 1: comm's sequence- and tensor-parallel groups (kiln_comm_grid) */
    kiln_mem_limit mem_limit;    /* the ranks' agreed memory limit (pipeline/mem_agree.h), once mem_agreed */
    bool mem_agreed;             /* every rank's limit is configured: agreed once, reused by every request */
    kiln_tokenizer *tok;
    kiln_st_file *te_ck, *dit_ck, *vae_ck;  /* te_ck may be closed between requests when memory is tight */
    kiln_qwen3 *te;
    kiln_flux2_dit *dit;
    kiln_flux2_vae *vae;
    size_t te_bytes, dit_bytes, vae_bytes; /* weight bytes each model touches */
    size_t te_ws_seq;            /* Qwen3 activation bytes for one 512-token sequence (kept while te is closed) */
    bool te_released;            /* the last request closed the text encoder to make room for the DiT */
    size_t act_base, act_planned; /* the request's start: be's live allocations; its plan's activation bytes */
    uint64_t n_requests;
    char describe[512];
    /* FLUX.1 [dev] / [schnell] (engine_flux1.h): non-NULL when the files are FLUX.1's; the FLUX.2 fields above
     * then stay empty. clip2_path: the T5 single file. */
    struct kiln_flux1_models *f1;
    char *clip2_path;
};

/* Shared by the families' engine files: p names a folder / anything that exists (NULL: false); the weight
 * bytes a checkpoint's models touch, skipping Qwen3 layers >= skip_from (never run; 0: none) and lm_head. */
bool kiln_engine_is_dir(const char *p);
bool kiln_engine_exists(const char *p);
size_t kiln_engine_weight_bytes(const kiln_st_file *ck, int skip_from);

/* Opens (or reopens) the text encoder checkpoint and model. */
kiln_status kiln_engine_open_text_encoder(kiln_engine *eng, kiln_err *err);
void kiln_engine_close_text_encoder(kiln_engine *eng);
/* The request's LoRA adapters onto the engine's DiT (engine_lora.c): *out NULL when it names none; detach with
 * kiln_lora_detach when the request ends. */
kiln_status kiln_engine_lora_attach(kiln_engine *eng, const kiln_request *req, kiln_lora_set **out, kiln_err *err);

#endif
