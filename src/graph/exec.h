/* exec.h - the executor's state, shared by graph_exec.c and the node implementations (nodes.c). Internal. */
#ifndef KILN_GRAPH_EXEC_H
#define KILN_GRAPH_EXEC_H

#include "graph/graph.h"
#include "graph/value.h"

typedef struct kiln_exec {
    const kiln_graph *g;
    const kiln_exec_env *env;
    const kiln_exec_hooks *hooks;
    json_t *outputs; /* {node_id: ui} */
    kiln_err *err;
} kiln_exec;

/* Node entry points (nodes.c), named in the table (node_table.c). Each returns a kiln_status. */
int kiln_node_unet_loader(kiln_exec *ex, const char *id, kiln_value *const *in, kiln_value *out);
int kiln_node_unet_loader_gguf(kiln_exec *ex, const char *id, kiln_value *const *in, kiln_value *out);
int kiln_node_unet_loader_gguf_advanced(kiln_exec *ex, const char *id, kiln_value *const *in, kiln_value *out);
int kiln_node_checkpoint_loader(kiln_exec *ex, const char *id, kiln_value *const *in, kiln_value *out);
int kiln_node_clip_loader(kiln_exec *ex, const char *id, kiln_value *const *in, kiln_value *out);
int kiln_node_vae_loader(kiln_exec *ex, const char *id, kiln_value *const *in, kiln_value *out);
int kiln_node_clip_text_encode(kiln_exec *ex, const char *id, kiln_value *const *in, kiln_value *out);
int kiln_node_conditioning_zero_out(kiln_exec *ex, const char *id, kiln_value *const *in, kiln_value *out);
int kiln_node_empty_flux2_latent(kiln_exec *ex, const char *id, kiln_value *const *in, kiln_value *out);
int kiln_node_random_noise(kiln_exec *ex, const char *id, kiln_value *const *in, kiln_value *out);
int kiln_node_ksampler_select(kiln_exec *ex, const char *id, kiln_value *const *in, kiln_value *out);
int kiln_node_flux2_scheduler(kiln_exec *ex, const char *id, kiln_value *const *in, kiln_value *out);
int kiln_node_cfg_guider(kiln_exec *ex, const char *id, kiln_value *const *in, kiln_value *out);
int kiln_node_sampler_custom_advanced(kiln_exec *ex, const char *id, kiln_value *const *in, kiln_value *out);
int kiln_node_ksampler(kiln_exec *ex, const char *id, kiln_value *const *in, kiln_value *out);
int kiln_node_vae_decode(kiln_exec *ex, const char *id, kiln_value *const *in, kiln_value *out);
int kiln_node_pixelize(kiln_exec *ex, const char *id, kiln_value *const *in, kiln_value *out);
int kiln_node_save_image(kiln_exec *ex, const char *id, kiln_value *const *in, kiln_value *out);
int kiln_node_primitive(kiln_exec *ex, const char *id, kiln_value *const *in, kiln_value *out);
int kiln_node_preview_image(kiln_exec *ex, const char *id, kiln_value *const *in, kiln_value *out);
int kiln_node_dual_clip_loader(kiln_exec *ex, const char *id, kiln_value *const *in, kiln_value *out);
int kiln_node_lora_loader_model_only(kiln_exec *ex, const char *id, kiln_value *const *in, kiln_value *out);
int kiln_node_lora_loader(kiln_exec *ex, const char *id, kiln_value *const *in, kiln_value *out);
int kiln_node_model_sampling_flux(kiln_exec *ex, const char *id, kiln_value *const *in, kiln_value *out);
int kiln_node_clip_text_encode_flux(kiln_exec *ex, const char *id, kiln_value *const *in, kiln_value *out);
int kiln_node_flux_guidance(kiln_exec *ex, const char *id, kiln_value *const *in, kiln_value *out);
int kiln_node_reference_latent(kiln_exec *ex, const char *id, kiln_value *const *in, kiln_value *out);
int kiln_node_basic_scheduler(kiln_exec *ex, const char *id, kiln_value *const *in, kiln_value *out);
int kiln_node_basic_guider(kiln_exec *ex, const char *id, kiln_value *const *in, kiln_value *out);
int kiln_node_load_image(kiln_exec *ex, const char *id, kiln_value *const *in, kiln_value *out);
int kiln_node_image_scale_to_total_pixels(kiln_exec *ex, const char *id, kiln_value *const *in, kiln_value *out);
int kiln_node_get_image_size(kiln_exec *ex, const char *id, kiln_value *const *in, kiln_value *out);
int kiln_node_vae_encode(kiln_exec *ex, const char *id, kiln_value *const *in, kiln_value *out);
int kiln_node_save_image_websocket(kiln_exec *ex, const char *id, kiln_value *const *in, kiln_value *out);

#endif
