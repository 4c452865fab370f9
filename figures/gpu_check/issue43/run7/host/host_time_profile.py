"""Where the scoring phase's non-model time goes on the GPU (diagnostic; not part of the repository)."""
import cProfile, io, json, os, pstats, sys, time
import torch
from experiments import gpu_check as g
from experiments.gpu_phases import sync
from posixlab.scoring import engine as E
from posixlab.scoring import trie as T
from posixlab.scoring import EngineOptions, ScoringEngine

dev = torch.device(sys.argv[1] if len(sys.argv) > 1 else "cuda")
nsets = int(sys.argv[2]) if len(sys.argv) > 2 else 24
tiny = dev.type == "cpu"
tok, _ = g.load_tokenizer(".gpu/tokenizer")
cfg = g.CONFIGS["tiny" if tiny else "gpu"]
shape = cfg.speed_model
dtype = torch.float32 if tiny else torch.bfloat16
model = g.build_model(shape, tok, seed=0, dtype=dtype, device=dev, generator_device=dev)
lm = g.wrap(model, tok, "m", shape, 0)
timers = {}
def timed_fn(name, fn):
    def run(*a, **k):
        sync(dev); t = time.perf_counter()
        try:
            return fn(*a, **k)
        finally:
            sync(dev); c = timers.setdefault(name, [0.0, 0]); c[0] += time.perf_counter() - t; c[1] += 1
    return run
E.selected_logprobs = timed_fn("selected_logprobs", E.selected_logprobs)
T.ResponseTrie.ancestors = timed_fn("trie.ancestors", T.ResponseTrie.ancestors)
T.ResponseTrie.__init__ = timed_fn("trie.__init__", T.ResponseTrie.__init__)
for m in ("_stack_kv", "_score_chunk", "_score", "_prefill", "_decode", "_run_segments"):
    setattr(ScoringEngine, m, timed_fn(m, getattr(ScoringEngine, m)))
lm.forward_masked = timed_fn("forward_masked", lm.forward_masked)
lm._additive = timed_fn("_additive", lm._additive)
KEYS = ("num_alloc_retries", "num_device_alloc", "num_device_free", "num_ooms")
out = {}
for w in cfg.speed:
    if w.name == "mmlu":
        continue
    w = g.Workload(w.name, w.open, w.variant, nsets, w.num_variants, w.max_new_tokens, w.shots)
    texts, ids = g.build_sets(lm, w, 0)
    list(ScoringEngine(lm, w.max_new_tokens, EngineOptions()).score_sets(ids))  # warm-up
    timers.clear()
    s0 = torch.cuda.memory_stats() if not tiny else {}
    pr = cProfile.Profile(); sync(dev); t = time.perf_counter(); pr.enable()
    list(ScoringEngine(lm, w.max_new_tokens, EngineOptions()).score_sets(ids))
    sync(dev); pr.disable(); total = time.perf_counter() - t
    s1 = torch.cuda.memory_stats() if not tiny else {}
    row = {"total_s": round(total, 3), "timers": {k: [round(v[0], 3), v[1]] for k, v in timers.items()},
           "alloc": {k: s1.get(k, 0) - s0.get(k, 0) for k in KEYS}}
    print(w.name, json.dumps(row), flush=True)
    for key in ("tottime", "cumulative"):
        buf = io.StringIO(); pstats.Stats(pr, stream=buf).sort_stats(key).print_stats(22); print(buf.getvalue()[-5000:])
    out[w.name] = row
print(json.dumps(out))
