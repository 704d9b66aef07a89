"""Full-size tensor manifests of FLUX.2 [klein] 9B (distilled and base): the official classes on the meta device
with the published configs (spec 5: DiT hidden 4096 = 32 heads x 128, 8 double + 24 single blocks, mlp_ratio 3,
joint_attention_dim 12288; Qwen3-8B: hidden 4096, intermediate 12288, 36 layers, 32 q / 8 kv heads, head_dim 128,
UNTIED lm_head, stored). Layouts: the diffusers folder (5 GB text-encoder shards, as make_manifests.py) and the
ComfyUI models/ tree (flux-2-klein-9b.safetensors BFL names, qwen_3_8b.safetensors HF names with lm_head -
whether Comfy-Org's file keeps lm_head is not verified; kiln ignores it either way -, flux2-vae.safetensors)."""
import common
import layouts
import make_manifests as mm

DIT_9B = dict(mm.DIT_4B, num_layers=8, num_single_layers=24, num_attention_heads=32, joint_attention_dim=12288)
QWEN3_8B = dict(mm.QWEN3_4B, hidden_size=4096, intermediate_size=12288, tie_word_embeddings=False)


def main():
    mm.DIT_4B, mm.QWEN3_4B = DIT_9B, QWEN3_8B  # the module's builders read these at call time
    dit = mm.dit_model()
    dsd = dit.state_dict()
    d_ts, b_ts = mm.tensors(dsd), mm.tensors(layouts.dit_diffusers_to_bfl(dsd))
    q_ts = mm.tensors(dict(mm.qwen_model().state_dict()))  # untied: lm_head.weight stored
    mm.check("qwen3-8b", any(t["name"] == "lm_head.weight" for t in q_ts), "no lm_head")
    v_ts = mm.tensors(mm.vae_model().state_dict())
    te_files = mm.shard(q_ts, "")
    dit_cfg, vae_cfg = mm._config_json(dit), mm._config_json(mm.vae_model())
    n_dit, n_te = mm.nparams(b_ts), mm.nparams(q_ts)
    print("manifest klein 9B: DiT %d tensors %.4f B params; Qwen3-8B %d tensors %.4f B params, %d shards"
          % (len(b_ts), n_dit / 1e9, len(q_ts), n_te / 1e9, len(te_files)))
    mm.check("dit", abs(n_dit / 1e9 - 9.08) < 0.02, "DiT params %.4f B, spec 5 says ~9.08" % (n_dit / 1e9))
    mm.check("qwen3", abs(n_te / 1e9 - 8.19) < 0.02, "Qwen3-8B params %.4f B" % (n_te / 1e9))
    for name, distilled in (("flux2-klein-9b", True), ("flux2-klein-base-9b", False)):
        files = [{"path": "transformer/diffusion_pytorch_model.safetensors", "metadata": {"format": "pt"},
                  "tensors": d_ts}]
        files += [dict(f, path="text_encoder/" + f["path"]) for f in te_files]
        files += [{"path": "vae/diffusion_pytorch_model.safetensors", "metadata": {"format": "pt"}, "tensors": v_ts}]
        mm.write_manifest("%s.folder.diffusers.json" % name, mm.manifest(
            name, "folder", "diffusers", "the diffusers Flux2KleinPipeline folder of klein 9B (is_distilled %s), "
            "official classes on the meta device (tools/reference/make_manifests_9b.py)" % str(distilled).lower(),
            files, index={"path": "text_encoder/model.safetensors.index.json",
                          "files": [f["path"] for f in files if f["path"].startswith("text_encoder/")]},
            extra_files=[{"path": "model_index.json", "json": mm.model_index(distilled)},
                         {"path": "transformer/config.json", "json": dit_cfg},
                         {"path": "text_encoder/config.json", "json": mm.qwen_config_json()},
                         {"path": "vae/config.json", "json": vae_cfg},
                         {"path": "scheduler/scheduler_config.json", "json": mm.scheduler_json()}],
            copy_tokenizer="tokenizer"))
    mm.write_manifest("flux2-klein-9b.folder.comfy.json", mm.manifest(
        "flux2-klein-9b", "folder", "bfl", "ComfyUI models/ layout of klein 9B: diffusion_models (BFL names), "
        "text_encoders (HF names, lm_head kept), vae (diffusers names)",
        [{"path": "diffusion_models/flux-2-klein-9b.safetensors", "tensors": b_ts},
         {"path": "text_encoders/qwen_3_8b.safetensors", "tensors": q_ts},
         {"path": "vae/flux2-vae.safetensors", "tensors": v_ts}]))


if __name__ == "__main__":
    common.deterministic()
    main()
