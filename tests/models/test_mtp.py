"""Multi-token prediction (task.mtp_depth, DeepSeek-V3 §2.2): the modules against the paper's
equations on a case computed step by step here (there is no transformers forward of them), the
training loss L + (λ/D)·Σ_k L_k, the torch-free parameter and FLOP counts against the built
modules, and the refusals."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

import zoo
from tests.conftest import tiny
from tests.contract.conftest import flop_counter
from zoo.config.errors import ConfigError
from zoo.config.facts.mtp import mtp_refusal
from zoo.config.schema.flops import mtp_flops, mtp_module_flops
from zoo.config.schema.model import ModelConfig
from zoo.config.schema.params import mtp_params
from zoo.config.schema.task import TaskConfig
from zoo.config.schema.validate import validate
from zoo.models import build_model
from zoo.models.mtp import MultiTokenPrediction
from zoo.tasks import TASKS

T = 6  # inputs per window


def _hand_cfg() -> dict:
    """RMSNorm, pre-norm, no biases, ReLU, no position scheme: every step writes out plainly."""
    return tiny(position="none", n_layers=1, norm_type="rmsnorm", bias=False, activation="relu", init_std=0.5)


def _rms(x: torch.Tensor, gain: torch.Tensor, eps: float) -> torch.Tensor:
    return x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + eps) * gain


def _module_by_hand(p: dict, k: int, h_prev: torch.Tensor, e: torch.Tensor, cfg: ModelConfig) -> torch.Tensor:
    """Module k of DeepSeek-V3 eqs. 21-22 from its weights `p` (name -> tensor, names under
    layers.{k-1}.), written out: h' = M [RMSNorm(h); RMSNorm(e)], then one pre-norm causal
    block and the module's final RMSNorm."""
    eps, H, Dh = cfg.norm_eps, cfg.n_heads, cfg.head_dim
    w = {name.split(".", 2)[2]: t for name, t in p.items() if name.startswith(f"layers.{k - 1}.")}
    joined = torch.cat([_rms(h_prev, w["norm_h.weight"], eps), _rms(e, w["norm_e.weight"], eps)], dim=-1)
    x = joined @ w["proj.weight"].T  # (B, n, D)
    B, n, D = x.shape
    a = _rms(x, w["block.self_attn_sub.norm.weight"], eps)
    q, key, v = (a @ w["block.self_attn.qkv_proj.weight"].T).split([H * Dh, H * Dh, H * Dh], dim=-1)
    q, key, v = (t.view(B, n, H, Dh).transpose(1, 2) for t in (q, key, v))  # (B, H, n, Dh)
    scores = q @ key.transpose(-1, -2) / math.sqrt(Dh)  # (B, H, n, n)
    future = torch.triu(torch.ones(n, n, dtype=torch.bool), diagonal=1)
    weights = scores.masked_fill(future, float("-inf")).softmax(-1)
    attended = (weights @ v).transpose(1, 2).reshape(B, n, H * Dh)  # (B, n, H·Dh)
    x = x + attended @ w["block.self_attn.o_proj.weight"].T
    f = _rms(x, w["block.ff_sub.norm.weight"], eps)
    x = x + torch.relu(f @ w["block.ff.w_in.weight"].T) @ w["block.ff.w_out.weight"].T
    return _rms(x, w["final_norm.weight"], eps)


def test_the_modules_follow_deepseek_v3_equations_on_a_case_written_out_by_hand():
    cfg = ModelConfig(**_hand_cfg())
    model = build_model(cfg, init_seed=3).eval()
    mtp = MultiTokenPrediction(cfg, 2)
    mtp.initialise("mtp", 3)
    window = torch.randint(0, cfg.vocab_size, (2, T + 1), generator=torch.Generator().manual_seed(0))
    ids, labels = window[:, :-1], window[:, 1:]  # (B, T) each
    with torch.no_grad():
        h0 = model(ids).hidden_states  # (B, T, D), what the output head reads
        got = mtp.losses(model, h0, ids, labels, output_loss="logits")
        p = dict(mtp.named_parameters())
        table, head = model.embed.weight * cfg.embedding_multiplier, model.lm_head.weight
        h1 = _module_by_hand(p, 1, h0[:, : T - 1], table[window[:, 1:T]], cfg)  # Emb(t_{i+1}), (B, T-1, D)
        h2 = _module_by_hand(p, 2, h1[:, : T - 2], table[window[:, 2:T]], cfg)  # Emb(t_{i+2}), (B, T-2, D)
        # eq. 23-24: P^k = OutHead(h^k) predicts t_{i+k+1}, the window's token k+1 after position i
        want = [
            F.cross_entropy((h1 @ head.T).reshape(-1, cfg.vocab_size), window[:, 2:].reshape(-1)),
            F.cross_entropy((h2 @ head.T).reshape(-1, cfg.vocab_size), window[:, 3:].reshape(-1)),
        ]
    assert [float(x.loss) for x in got] == pytest.approx([float(x) for x in want], abs=1e-5)
    assert float(want[0]) != pytest.approx(float(want[1]), abs=1e-3)  # the depths differ


def test_the_training_loss_is_the_main_loss_plus_lambda_over_d_times_the_depths_sum():
    task = TASKS["causal_lm"](model=_hand_cfg(), task={"kind": "causal_lm", "mtp_depth": 2, "mtp_weight": 0.5})
    plain = TASKS["causal_lm"](model=_hand_cfg(), task={"kind": "causal_lm"})
    plain.model.load_state_dict(task.model.state_dict())
    window = torch.randint(0, 37, (2, T + 1), generator=torch.Generator().manual_seed(1))
    batch = {"input_ids": window[:, :-1], "labels": window[:, 1:]}
    loss, _, _ = task.training_loss(batch)
    main, _, _ = plain.training_loss(batch)
    depths = task.last_mtp_losses
    assert depths is not None and len(depths) == 2
    assert float(loss.detach()) == pytest.approx(
        float(main.detach()) + 0.5 / 2 * (float(depths[0]) + float(depths[1])), rel=1e-6
    )
    loss.backward()  # every module's parameters get a gradient (DDP needs no unused ones)
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in task.mtp.parameters())


@pytest.mark.parametrize(
    "overrides",
    [
        {},
        {"bias": False, "norm_type": "rmsnorm", "activation": "swiglu"},
        {"norm": "post"},
        {"norm": "sandwich", "block": "parallel"},
        {"ffn": "moe", "moe_experts": 4, "moe_top_k": 2, "moe_d_ff": 8, "bias": False},
        {"qk_norm": "head", "n_kv_heads": 1},
    ],
    ids=["gpt", "llama", "post", "sandwich-parallel", "moe", "qk-norm-gqa"],
)
def test_the_torch_free_counts_equal_the_built_modules(overrides):
    cfg = ModelConfig(**tiny(position="rope", **overrides))
    model = build_model(cfg, init_seed=0)
    mtp = MultiTokenPrediction(cfg, 3)
    assert sum(p.numel() for p in mtp.parameters()) == mtp_params(cfg, 3)
    ids = torch.randint(0, cfg.vocab_size, (1, 12))
    with torch.no_grad():
        hidden = model(ids).hidden_states
    with torch.no_grad(), flop_counter() as counter:
        states = mtp(model, hidden, ids)
        for h in states:
            model.logits(h)
    # module k runs T - k tokens at context T - k
    assert counter.get_total_flops() == sum((12 - k) * mtp_module_flops(cfg, 12 - k) for k in (1, 2, 3))
    assert mtp_flops(cfg, 3, 12) == 3 * mtp_module_flops(cfg, 12)


@pytest.mark.parametrize(
    "task, message",
    [
        ({"mtp_depth": -1}, "task.mtp_depth must be an integer from 0 (off) to 16, got -1"),
        ({"mtp_depth": 1.5}, "task.mtp_depth must be an integer"),
        ({"mtp_depth": 1, "mtp_weight": -0.1}, "task.mtp_weight must be a number >= 0"),
        ({"mtp_depth": 1, "kind": "masked_lm"}, "trains a left-to-right language model (task=causal_lm), not"),
        ({"mtp_depth": 2, "kind": "seq2seq"}, "not task=seq2seq"),
    ],
)
def test_a_task_that_cannot_take_the_modules_is_refused_on_one_line(task, message):
    with pytest.raises(ConfigError, match=None) as caught:
        TaskConfig(**task)
    assert message in str(caught.value) and "\n" not in str(caught.value)


def test_the_run_level_refusals():
    common = dict(parametrization="standard", sharded=False, document_mask=False, seq_len=32)
    assert mtp_refusal(0, **{**common, "parametrization": "mup"}) is None  # off: nothing to refuse
    assert mtp_refusal(2, **common) is None
    assert "model.parametrization=mup" in mtp_refusal(1, **{**common, "parametrization": "mup"})
    assert "trainer=fsdp" in mtp_refusal(1, **{**common, "sharded": True})
    assert "data.document_mask=false" in mtp_refusal(1, **{**common, "document_mask": True})
    assert "data.seq_len=4" in mtp_refusal(4, **{**common, "seq_len": 4})


def test_zoo_train_refuses_the_modules_with_mup_before_any_weight_exists():
    with pytest.raises(ConfigError, match="task.mtp_depth=1 with model.parametrization=mup"):
        validate(zoo.compose(["task.mtp_depth=1", "model.parametrization=mup", "model.mup_base_d_model=32"]))
