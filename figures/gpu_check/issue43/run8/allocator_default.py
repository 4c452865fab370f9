"""The allocator A/B (diagnostic, not in the repository): plain engine runs, 24 sets a workload, warm-up first, under
whatever PYTORCH_CUDA_ALLOC_CONF this process was started with."""
import json, os, sys, time
import torch
from experiments import gpu_check as g
from experiments.gpu_phases import sync
from posixlab.scoring import EngineOptions, ScoringEngine

dev = torch.device(sys.argv[1] if len(sys.argv) > 1 else "cuda")
cfg = g.CONFIGS["tiny" if dev.type == "cpu" else "gpu"]
tok, _ = g.load_tokenizer(".gpu/tokenizer")
dtype = torch.float32 if dev.type == "cpu" else torch.bfloat16
lm = g.wrap(g.build_model(cfg.speed_model, tok, seed=0, dtype=dtype, device=dev, generator_device=dev), tok, "m",
            cfg.speed_model, 0)
KEYS = ("num_alloc_retries", "num_device_alloc", "num_device_free")
out = {"allocator": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "<unset>")}
for w in cfg.speed:
    _, ids = g.build_sets(lm, w, 0)
    list(ScoringEngine(lm, w.max_new_tokens, EngineOptions()).score_sets(ids))  # warm-up, as gpu_check's
    s0 = torch.cuda.memory_stats() if dev.type == "cuda" else {}
    sync(dev); t = time.perf_counter()
    list(ScoringEngine(lm, w.max_new_tokens, EngineOptions()).score_sets(ids))
    sync(dev); seconds = time.perf_counter() - t
    s1 = torch.cuda.memory_stats() if dev.type == "cuda" else {}
    out[w.name] = {"sets": len(ids), "s_per_set": round(seconds / len(ids), 4),
                   **{k: s1.get(k, 0) - s0.get(k, 0) for k in KEYS}}
    print(w.name, out[w.name], flush=True)
print(json.dumps(out))
