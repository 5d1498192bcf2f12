"""The trainer at toy scale: exact resume, the MTP head's DeepSeek-V3 keys and its loading and
drafting through mlatui.run.drafts and the engine, the repetition measure and the long contexts."""

from __future__ import annotations

import json
from pathlib import Path

import mlx.core as mx
import pytest
from mlx.utils import tree_flatten

from mlatui.measure.acceptance import distinct_ngram_share
from tools.train import train
from tools.train.contexts import ContextError, long_prompt
from tools.train.corpus import stdlib_root
from tools.train.prepare import prepare

TOY = ["--preset", "tiny", "--seq", "64", "--batch", "2", "--warmup", "4", "--eval-every", "4",
       "--eval-batches", "1", "--ckpt-every-min", "60"]  # fmt: skip


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    """A real (small) corpus: the stdlib's `json` package, its own 300-token BPE."""
    out = tmp_path_factory.mktemp("corpus")
    prepare(out, stdlib_root() / "json", vocab_size=300, seed=0, max_length=1024)
    return out


def _train(corpus: Path, out: Path, *extra: str) -> int:
    return train.main(["--data", str(corpus), "--out", str(out), *TOY, *extra])


def _tensors(path: Path) -> dict[str, mx.array]:
    return mx.load(str(path))


def _assert_identical(a: dict[str, mx.array], b: dict[str, mx.array]) -> None:
    assert sorted(a) == sorted(b)
    for k in a:
        assert a[k].dtype == b[k].dtype and mx.array_equal(a[k], b[k]).item(), k


@pytest.fixture(scope="module")
def toy_run(corpus, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("run")
    assert _train(corpus, out, "--steps", "10") == 0
    return out


def test_resume_is_bit_identical_to_an_uninterrupted_run(corpus, toy_run, tmp_path):
    split = tmp_path / "split"
    assert _train(corpus, split, "--steps", "10", "--stop-at-step", "3") == train.PAUSED_EXIT
    state = json.loads((split / "ckpt" / "state.json").read_text())
    assert state["step"] == 3 and not state["done"]
    assert _train(corpus, split, "--steps", "10", "--stop-at-step", "7", "--resume") == 3
    assert _train(corpus, split, "--steps", "10", "--resume") == 0
    for f in ("params.safetensors", "optimizer.safetensors"):
        _assert_identical(_tensors(toy_run / "ckpt" / f), _tensors(split / "ckpt" / f))
    whole = json.loads((toy_run / "ckpt" / "state.json").read_text())
    parts = json.loads((split / "ckpt" / "state.json").read_text())
    assert parts["calls"] == 3 and whole["calls"] == 1
    assert parts["rng"] == whole["rng"] and parts["tokens"] == whole["tokens"] == 10 * 2 * 64
    done = [json.loads(x) for x in (split / "train.jsonl").read_text().splitlines()]
    assert [r["event"] for r in done if r.get("event") in ("start", "resume", "paused", "done")] == [
        "start", "paused", "resume", "paused", "resume", "done"]  # fmt: skip
    # a finished run resumed again does nothing
    assert _train(corpus, split, "--steps", "10", "--resume") == 0


def test_time_limit_checkpoints_and_exits_then_resume_finishes(corpus, tmp_path):
    out = tmp_path / "timed"
    assert _train(corpus, out, "--steps", "3", "--max-seconds", "1") == train.PAUSED_EXIT
    paused = json.loads((out / "train.jsonl").read_text().splitlines()[-1])
    assert paused["event"] == "paused" and paused["why"] == "max-seconds"
    assert (out / "ckpt" / "params.safetensors").exists() and (
        out / "model" / "config.json"
    ).exists()
    assert _train(corpus, out, "--steps", "3", "--resume") == 0


def test_auto_steps_are_planned_from_timed_steps_inside_the_warmup(corpus, tmp_path):
    out = tmp_path / "auto"
    args = ("--steps", "auto", "--plan-steps", "3", "--train-budget-s", "3")
    assert _train(corpus, out, *args) == 0
    log = [json.loads(x) for x in (out / "train.jsonl").read_text().splitlines()]
    plan = next(r for r in log if r.get("event") == "planned")
    done = log[-1]
    assert plan["step"] == 3 < 4  # the warm-up is 4 steps
    assert plan["total_steps"] > plan["step"] and done["event"] == "done"
    assert done["steps"] == plan["total_steps"]
    assert json.loads((out / "ckpt" / "state.json").read_text())["step_seconds"] > 0


def test_resume_refuses_another_run_and_fresh_start_refuses_a_checkpoint(
    corpus, toy_run, tmp_path, capsys
):
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(toy_run, copy)
    assert _train(corpus, copy, "--steps", "12", "--resume") == 2
    err = capsys.readouterr().err
    assert err.startswith("mlatui: error: ") and "steps: saved '10', given '12'" in err
    assert _train(corpus, copy, "--steps", "10") == 2
    assert "pass --resume" in capsys.readouterr().err
    assert _train(corpus, tmp_path / "none", "--steps", "10", "--resume") == 2
    assert "no checkpoint" in capsys.readouterr().err


def test_warmup_learning_rates_do_not_depend_on_the_plan():
    """--steps auto plans inside the warm-up: those steps' rates must be the same for any plan."""
    early = [[train.lr_at(s, total, 2e-3, 200) for s in range(30)] for total in (500, 9000)]
    assert early[0] == early[1]
    assert train.lr_at(500, 500, 2e-3, 200) == pytest.approx(2e-4)
    assert train.lr_at(200, 500, 2e-3, 200) == pytest.approx(2e-3)


def test_mtp_keys_use_the_deepseek_v3_prefix_and_load_through_mtp_py(toy_run):
    from mlatui.models.loading import load_checkpoint
    from mlatui.run.drafts import MTPDraft, load_mtp_draft

    folder = toy_run / "model"
    config = json.loads((folder / "config.json").read_text())
    n = config["num_hidden_layers"]
    assert config["num_nextn_predict_layers"] == 1
    saved = {k: v for f in folder.glob("model*.safetensors") for k, v in _tensors(f).items()}
    mtp_keys = sorted(k for k in saved if k.startswith(f"model.layers.{n}."))
    local = {k.removeprefix(f"model.layers.{n}.") for k in mtp_keys}
    assert {"enorm.weight", "hnorm.weight", "eh_proj.weight", "shared_head.norm.weight",
            "input_layernorm.weight", "post_attention_layernorm.weight"} <= local  # fmt: skip
    assert any(k.startswith("self_attn.") for k in local) and any(
        k.startswith("mlp.") for k in local
    )
    assert not any(k.startswith("shared_head.head") or "embed_tokens" in k for k in local)  # shared
    model, _, _ = load_checkpoint(str(folder))  # mlx-lm drops the MTP layer from the trunk
    assert len(model.model.layers) == n
    head = load_mtp_draft(folder, model)
    assert isinstance(head, MTPDraft)
    trained = dict(tree_flatten(head.head.layer.parameters()))
    assert sorted(trained) == sorted(local)
    ckpt = _tensors(toy_run / "ckpt" / "params.safetensors")
    for k, v in trained.items():  # float16 on disk, float32 as trained
        want = ckpt[f"mtp.layer.{k}"].astype(mx.float16).astype(v.dtype)
        assert mx.array_equal(v, want).item(), k


def test_trained_mtp_head_drafts_and_matches_greedy(toy_run):
    from mlatui.models.loading import load_checkpoint
    from mlatui.run.drafts import load_mtp_draft
    from tools.train.acceptance import greedy, speculate

    model, tok, _ = load_checkpoint(str(toy_run / "model"))
    head = load_mtp_draft(toy_run / "model", model)
    ids = tok.encode('def decode(self, s):\n    """Return the Python object')
    want = greedy(model, ids, 16)
    for depth in (1, 2):
        r = speculate(model, head.twin(), ids, 16, depth)
        assert r.tokens == want and r.counts.verify_steps >= 16 // (depth + 1)


@pytest.mark.slow  # the default run's test_looping_guard tune drafts with the trainer's MTP head
def test_engine_drafts_through_the_mtp_path(toy_run, tmp_path):
    from mlatui.config.run_plan import RunConfig, resolve_plan
    from mlatui.run.engine import run
    from mlatui.stream.events import DecodeResult, RunHeader

    scenario = tmp_path / "mtp.toml"
    scenario.write_text(
        f'name = "toy-mtp"\nseed = 0\n[model]\nsource = "path"\npath = "{toy_run / "model"}"\n'
        '[draft]\nsource = "mtp"\n[[phase]]\nname = "decode"\nkind = "decode"\ncontexts = [48]\n'
        "depths = [2]\ntokens = 8\nreps = 2\nmax_rounds = 2\nwarmup = 1\n"  # no rounds added
    )
    events = []
    plan = resolve_plan(RunConfig(scenario=str(scenario)))
    assert run(plan, events.append) in ("completed", "invalid")
    header = next(e for e in events if isinstance(e, RunHeader))
    assert header.draft == "mtp"
    spec = [e for e in events if isinstance(e, DecodeResult) and e.depth == 2]
    assert spec and all(e.counts["verify_steps"] > 0 for e in spec)
    assert {e.arm for e in spec} == {"stock", "patched"}


def test_distinct_4gram_share_on_hand_made_streams():
    assert distinct_ngram_share(list(range(10))) == 1.0  # 7 distinct of 7
    assert distinct_ngram_share([1, 2, 3] * 4) == pytest.approx(3 / 9)  # a 3-token loop
    assert distinct_ngram_share([5] * 8) == pytest.approx(1 / 5)
    assert distinct_ngram_share([1, 2, 3, 4, 1, 2, 3, 4, 9]) == pytest.approx(5 / 6)
    assert distinct_ngram_share([1, 2, 3]) is None


class CharTokenizer:
    def encode(self, text: str) -> list[int]:
        return [ord(c) for c in text]


def test_long_prompt_is_other_held_out_files_then_the_prompt():
    valid = ["AAAA", "BBBBBB", "prompt and its file", "CC"]
    tok = CharTokenizer()

    def text(length: int, prompt: str = "prompt") -> str:
        ids = long_prompt(tok, 0, prompt, valid, valid, length)
        assert len(ids) == length
        return "".join("|" if i == 0 else chr(i) for i in ids)

    # the files after the prompt's own (cyclically), whole and end-of-text separated, cut on the left
    assert text(14) == "AAAA|CC|prompt"
    assert text(16) == "B|AAAA|CC|prompt"
    assert text(4) == "ompt"
    with pytest.raises(ContextError):
        text(100)
    with pytest.raises(ContextError):
        text(10, "nowhere")


def _fake_package(site: Path, name: str, licence_line: str, files: dict[str, str]) -> None:
    dist = site / f"{name}-1.0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n{licence_line}\n"
    )
    (dist / "top_level.txt").write_text(name + "\n")
    for rel, text in files.items():
        (site / name / rel).parent.mkdir(parents=True, exist_ok=True)
        (site / name / rel).write_text(text)


def test_extra_packages_need_a_permissive_licence_and_skip_held_out_overlap(tmp_path):
    from tools.train.corpus import extra_docs

    held_out = ["def held_out_function_with_a_long_name(argument_one, argument_two):\n    pass\n"]
    _fake_package(tmp_path, "okpkg", "License-Expression: MIT", {
        "a.py": "def fresh_code_that_is_not_held_out(x):\n    return x + 1\n",
        "copy.py": held_out[0],
        "_vendor/v.py": "def vendored_copy_of_something_else_entirely():\n    pass\n",
    })  # fmt: skip
    _fake_package(tmp_path, "bsdpkg", "Classifier: License :: OSI Approved :: BSD License", {
        "b.py": "x = 1\n"})  # fmt: skip
    _fake_package(tmp_path, "gplpkg", "License-Expression: GPL-3.0-only", {"c.py": "y = 2\n"})
    docs, sources = extra_docs(tmp_path, ["okpkg", "bsdpkg"], held_out)
    assert [d.splitlines()[0] for d in docs] == ["# file: okpkg/a.py", "# file: bsdpkg/b.py"]
    ok, bsd = sources
    assert (ok.licence, ok.files, ok.skipped_overlap) == ("MIT", 1, 1)
    assert bsd.licence == "BSD-2-Clause"  # no licence text naming a third clause
    with pytest.raises(ValueError, match="GPL-3.0-only"):
        extra_docs(tmp_path, ["gplpkg"], held_out)
    with pytest.raises(FileNotFoundError):
        extra_docs(tmp_path, ["missing"], held_out)


def test_saved_tokenizer_loads_offline_with_end_of_text_as_eos_and_pad(tmp_path):
    from transformers import AutoTokenizer

    from tools.train.tokenizer import save_tokenizer, train_tokenizer

    tok = train_tokenizer(["def f(x):\n    return x + 1\n"] * 20, 300)
    eot = save_tokenizer(tok, tmp_path / "tok", 4096)
    loaded = AutoTokenizer.from_pretrained(str(tmp_path / "tok"))
    assert loaded.eos_token_id == eot == loaded.pad_token_id and loaded.unk_token is None
    assert loaded.model_max_length == 4096
    assert loaded.decode(loaded.encode("def f(x):")) == "def f(x):"


def _trainable(run: Path, prefix: str) -> dict[str, mx.array]:
    params = _tensors(run / "ckpt" / "params.safetensors")
    return {k: v for k, v in params.items() if k.startswith(prefix)}


def test_teacher_mode_trains_only_the_draft_and_writes_only_the_draft(corpus, toy_run, tmp_path):
    out = tmp_path / "distil"
    teacher = toy_run / "model"
    args = ("--teacher", str(teacher), "--draft-init-layers", "0", "--hard-distill", "1")
    assert _train(corpus, out, "--steps", "6", *args) == 0
    assert (out / "draft" / "config.json").exists() and not (out / "model").exists()
    # the frozen target is the teacher's weights, untouched by six steps
    shipped = {}
    for f in teacher.glob("*.safetensors"):
        shipped |= _tensors(f)
    kept = _trainable(out, "target.")
    assert kept and all(
        mx.array_equal(v, shipped[k[len("target.") :]].astype(v.dtype)).item()
        for k, v in kept.items()
    )
    # the draft began as teacher layer 0 and then learnt: it differs from it now
    draft0 = _trainable(out, "draft.model.layers.0.")
    assert draft0 and any(
        not mx.array_equal(v, shipped["model.layers.0." + k.split("layers.0.", 1)[1]]).item()
        for k, v in draft0.items()
    )
    log = [json.loads(x) for x in (out / "train.jsonl").read_text().splitlines()]
    start = next(r for r in log if r.get("event") == "start")
    assert start["draft_init"] == {"shared": ["embed_tokens", "norm"], "layers": [[0, 0]]}
    assert start["teacher"]["files"]["config.json"]
    done = log[-1]
    assert done["event"] == "done" and done["valid_ce_mtp"] == 0.0
    cfg = json.loads((out / "draft" / "config.json").read_text())
    assert cfg["num_hidden_layers"] == 1 and cfg["kv_lora_rank"] == 64  # the teacher's geometry


def test_teacher_mode_resumes_bit_identically(corpus, toy_run, tmp_path):
    args = ("--teacher", str(toy_run / "model"), "--draft-preset", "tiny", "--steps", "6")
    whole, split = tmp_path / "whole", tmp_path / "split"
    assert _train(corpus, whole, *args) == 0
    assert _train(corpus, split, *args, "--stop-at-step", "3") == train.PAUSED_EXIT
    assert _train(corpus, split, *args, "--resume") == 0
    for f in ("params.safetensors", "optimizer.safetensors"):
        _assert_identical(_tensors(whole / "ckpt" / f), _tensors(split / "ckpt" / f))


def test_teacher_mode_refusals(corpus, toy_run, tmp_path, capsys):
    teacher = str(toy_run / "model")
    assert _train(corpus, tmp_path / "a", "--steps", "2", "--teacher", teacher,
                  "--draft-init-layers", "1") == 2  # fmt: skip
    assert "sparse in the teacher" in capsys.readouterr().err
    assert _train(corpus, tmp_path / "b", "--steps", "2", "--teacher", str(tmp_path)) == 2
    assert "no config.json" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        _train(corpus, tmp_path / "c", "--steps", "2", "--hard-distill", "1")
    assert "need --teacher" in capsys.readouterr().err


# -- fine-tuning against greedy loops (sequence-level unlikelihood) ------------------------------


def test_repeat_mask_marks_every_token_of_a_4gram_the_row_already_produced():
    import numpy as np

    from tools.train.unlikelihood import repeat_mask

    rows = np.array([[1, 2, 3, 4, 1, 2, 3, 4, 9], [5, 6, 7, 8, 9, 10, 11, 12, 13]])
    assert repeat_mask(rows).tolist() == [[0, 0, 0, 0, 1, 1, 1, 1, 0], [0] * 9]
    from tools.train.unlikelihood import file_openings

    assert file_openings(np.array([5, 0, 7, 8, 0, 9]), eot=0).tolist() == [0, 2, 5]


def test_unlikelihood_loss_is_minus_log_one_minus_p_on_the_masked_tokens_only():
    import numpy as np

    from tools.train.unlikelihood import unlikelihood_loss

    logits = mx.array(np.random.default_rng(0).normal(size=(1, 3, 5)).astype(np.float32))
    tokens, mask = mx.array([[0, 3, 1]]), mx.array([[1.0, 0.0, 1.0]])
    p = mx.softmax(logits, axis=-1)[0]
    expect = -(np.log(1 - p[0, 0].item()) + np.log(1 - p[2, 1].item())) / 3
    assert unlikelihood_loss(logits, tokens, mask).item() == pytest.approx(expect, rel=1e-5)


def test_batched_greedy_continuations_are_each_rows_own_greedy_text_through_the_sparse_layer(
    tmp_path,
):
    """The embedded model's weights with its sparse layer's top-k at 32 (not 256): 200-token
    prefixes, 50 pools of 4 > top-k 32, so the sparse layer selects while the batch decodes
    (the 1100-token prefixes that top-k 256 needs cost 4 prefills of 2.6 s each on CPU)."""
    from mlatui.models.embedded import MODEL_PATH
    from mlatui.models.loading import load_checkpoint
    from tools.train.acceptance import greedy
    from tools.train.unlikelihood import greedy_continuations

    folder = tmp_path / "topk-32"
    folder.mkdir()
    for f in MODEL_PATH.iterdir():
        (folder / f.name).symlink_to(f)
    config = json.loads((MODEL_PATH / "config.json").read_text()) | {"index_topk": 32}
    (folder / "config.json").unlink()
    (folder / "config.json").write_text(json.dumps(config))
    model, tok, _ = load_checkpoint(str(folder))
    attn = model.layers[4].self_attn
    assert attn.indexer.index_topk == 32 and 200 // attn.indexer.kpool > attn.indexer.index_topk
    text = (stdlib_root() / "json" / "decoder.py").read_text()
    ids = tok.encode(text)
    rows = [ids[:200], ids[300:500]]
    batched = greedy_continuations(model, mx.array(rows), 12).tolist()
    assert batched == [greedy(model, r, 12) for r in rows]


def test_finetune_pushes_down_its_loops_and_ships_the_target_with_its_mtp_head(
    corpus, toy_run, tmp_path
):
    import numpy as np

    from tools.train import finetune
    from tools.train.unlikelihood import sequence_step_inputs, unlikelihood_loss

    net = finetune.load_trainee(toy_run / "model", 300, corpus / "tokenizer")
    ids = np.load(corpus / "tokens.npz")["train"]
    inputs, cont, mask, share = sequence_step_inputs(
        net.target, ids, 4, 16, 24, np.random.default_rng(0)
    )
    assert mask.sum().item() > 0 and share < 1  # the toy model loops
    import mlx.nn as nn
    import mlx.optimizers as optim

    def loss_fn(net):
        return unlikelihood_loss(net.target(inputs)[:, -cont.shape[1] :], cont, mask)

    vg, opt = nn.value_and_grad(net, loss_fn), optim.AdamW(learning_rate=3e-3)
    before = loss_fn(net).item()
    for _ in range(3):
        _, grads = vg(net)
        opt.update(net, grads)
        mx.eval(net.parameters())
    assert loss_fn(net).item() < 0.8 * before  # the repeated tokens became less likely
    out = tmp_path / "ft"
    argv = ["--init", str(toy_run / "model"), "--data", str(corpus), "--out", str(out),
            "--steps", "2", "--seq", "64", "--batch", "2", "--ul-batch", "2", "--ul-prefix",
            "16", "--ul-tokens", "12", "--eval-every", "2", "--eval-batches", "1",
            "--eval-prompts", "1", "--select-prompts", "2", "--max-select-ce-rise", "0.5",
            "--greedy-tokens", "24"]  # fmt: skip
    assert finetune.main(argv) == 0
    log = [json.loads(x) for x in (out / "finetune.jsonl").read_text().splitlines()]
    assert any("ul" in r and r["anchor_ce"] > 0 for r in log) and any("ce_target" in r for r in log)
    start = log[0]
    assert start["selection_prompts"] == 2 and 0 < start["select_ce"] < 20
    best = [r for r in log if r.get("event") == "best"]
    assert (out / "best" / "config.json").exists() == bool(best)
    shares = [start["select_distinct_4gram"]] + [r["select_distinct_4gram"] for r in best]
    assert shares == sorted(set(shares))  # each best beats the one before, the start first
    assert all(r["select_ce"] <= start["select_ce"] + 0.5 for r in best)
    assert log[-1]["event"] == "done" and 0 <= log[-1]["greedy_distinct_4gram"] <= 1
    assert 0 < log[-1]["prompt_ce"] < 20  # the prompts' loss from position 0 is watched too
    n = json.loads((out / "model" / "config.json").read_text())["num_hidden_layers"]
    saved = {}
    for f in (out / "model").glob("*.safetensors"):
        saved |= _tensors(f)
    assert any(k.startswith(f"model.layers.{n}.eh_proj") for k in saved)  # the MTP head


def test_the_anchor_is_the_prefixes_own_loss_read_from_position_0_and_selection_avoids_prompts(
    corpus, toy_run
):
    """The continuation cannot change a causal model's logits over the prefix, so the anchor
    equals the prefix's loss computed alone; and no text chosen by is a shipped prompt."""
    import mlx.nn as nn
    import numpy as np

    from mlatui.models.embedded import MODEL_PATH, prompts
    from tools.train import finetune
    from tools.train.unlikelihood import sequence_step_inputs

    net = finetune.load_trainee(toy_run / "model", 300, corpus / "tokenizer")
    ids = np.load(corpus / "tokens.npz")["train"]
    inputs, cont, mask, _ = sequence_step_inputs(
        net.target, ids, 2, 20, 10, np.random.default_rng(1)
    )
    pushed, anchor = finetune.unlikelihood_terms(net.target, inputs, cont, mask)
    prefix = inputs[:, :20]  # (B, P)
    alone = nn.losses.cross_entropy(net.target(prefix[:, :-1]), prefix[:, 1:], reduction="mean")
    assert anchor.item() == pytest.approx(alone.item(), rel=1e-4) and pushed.item() > 0
    from tokenizers import Tokenizer

    from tools.train.corpus import build_corpus
    from tools.train.prepare import encode

    bpe = Tokenizer.from_file(str(MODEL_PATH / "tokenizer.json"))
    valid = encode(bpe, build_corpus(seed=0).valid, eot=0)  # the held-out split, as prepared
    texts = [bpe.decode(c) for c in finetune.selection_ids(MODEL_PATH, valid, 0)]
    assert len(texts) == 8 and not set(texts) & set(prompts())
    assert any(t.startswith("# file: ") for t in texts)  # openings of the other held-out files


def test_a_draft_can_continue_from_a_shipped_draft_against_a_new_teacher(corpus, toy_run, tmp_path):
    out = tmp_path / "redistil"
    args = ("--teacher", str(toy_run / "model"), "--draft-init", str(toy_run / "draft"))
    assert _train(corpus, out, "--steps", "3", *args) == 0
    ours = json.loads((out / "draft" / "config.json").read_text())
    assert ours == json.loads((toy_run / "draft" / "config.json").read_text())
    log = [json.loads(x) for x in (out / "train.jsonl").read_text().splitlines()]
    assert next(r for r in log if r.get("event") == "start")["draft_init"] == {
        "from": str((toy_run / "draft").resolve())
    }
    assert log[-1]["valid_agree"] > 0


def test_ship_best_installs_the_chosen_checkpoint_and_records_its_evaluation(
    corpus, toy_run, tmp_path, monkeypatch
):
    """`ship --finetuned LOG --best` installs RUN/best, not RUN/model, and MANIFEST says which
    evaluation the shipped checkpoint had; the other shipped folder (the draft) stays."""
    import shutil

    from mlatui.models import embedded
    from tools.train import ship

    home = tmp_path / "embedded"
    for name in ("model", "draft"):
        shutil.copytree(toy_run / name, home / name)
    paths = {"EMBEDDED_DIR": home, "MODEL_PATH": home / "model", "DRAFT_PATH": home / "draft",
             "MANIFEST_PATH": home / "MANIFEST.json"}  # fmt: skip
    for k, v in paths.items():
        monkeypatch.setattr(embedded, k, v)
        if hasattr(ship, k):
            monkeypatch.setattr(ship, k, v)
    run = tmp_path / "ft"
    shutil.copytree(toy_run / "model", run / "model")
    shutil.copytree(toy_run / "draft", run / "best")  # any folder whose files differ from model/
    evals = [{"event": "start", "device": "cpu", "args": {}, "greedy_distinct_4gram": 0.2},
             {"step": 60, "greedy_distinct_4gram": 0.7},
             {"event": "best", "step": 60, "select_distinct_4gram": 0.7},
             {"step": 120, "greedy_distinct_4gram": 0.3},
             {"event": "done", "steps": 120, "greedy_distinct_4gram": 0.3}]  # fmt: skip
    (run / "finetune.jsonl").write_text("".join(json.dumps(e) + "\n" for e in evals))
    draft_before = embedded.sha256(home / "draft" / "model.safetensors")
    argv = ["--run", str(run), "--data", str(corpus), "--finetuned", str(run / "finetune.jsonl")]
    assert ship.main([*argv, "--best"]) == 0
    shipped = json.loads((home / "MANIFEST.json").read_text())
    assert shipped["finetune"][0]["taken"]["step"] == 60
    assert shipped["finetune"][0]["last_eval"]["greedy_distinct_4gram"] == 0.3
    best_weights = sorted(embedded.sha256(f) for f in (run / "best").glob("*.safetensors"))
    assert (
        sorted(embedded.sha256(f) for f in (home / "model").glob("*.safetensors")) == best_weights
    )
    assert embedded.sha256(home / "draft" / "model.safetensors") == draft_before
    assert embedded.verify_manifest() == []
    shutil.rmtree(run / "best")
    with pytest.raises(SystemExit, match="has no model"):
        ship.main([*argv, "--best"])
