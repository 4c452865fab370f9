"""Sampled replies from a model in this process (``posixlab.models.sampling``): each reply draws from its own seeded
generator, so a request's replies are the same alone or decoded beside others; the sampler draws from the tempered
top-p distribution; a repetition penalty counts only a row's own tokens."""

import pytest
import torch
from scipy.stats import chisquare

from posixlab.models import sampling
from posixlab.models.sampling import RowSampler, sample_chat, sample_chats
from posixlab.openai_client import Generation

SYSTEM = {"role": "system", "content": "Rewrite the question in other words, keeping its meaning. " * 3}


def requests(count: int, n: int = 3, budget: int = 10) -> list:
    """``count`` requests sharing a system message, of different lengths, budgets and seeds."""
    return [([SYSTEM, {"role": "user", "content": f"Question {i}: which planet is red?" + " Why?" * i}],
             Generation(budget + 3 * i, temperature=0.8, top_p=0.95, n=n, seed=11 + i)) for i in range(count)]


def test_the_sampler_draws_from_the_tempered_nucleus():
    """Fixed logits, drawn from 6,000 times by each row's generator: the counts fit softmax(logits / T) cut to its
    top-p nucleus and renormalised (a chi-square test; each row its own temperature and top-p), tokens outside the
    nucleus never come, a temperature-0 row always takes its argmax, and the same seeds give the same draws."""
    logits = torch.tensor([[2.0, 1.0, 0.5, 0.0, -1.0, -3.0]] * 3)
    settings = [(0.7, 0.8), (1.5, 1.0), (0.0, 1.0)]

    def draws(seeds):
        sampler = RowSampler(seeds, settings)
        ids = torch.zeros((3, 1), dtype=torch.long)
        return torch.stack([sampler(ids, logits).argmax(dim=-1) for _ in range(6000)], dim=1)

    drawn = draws([1, 2, 3])
    assert torch.equal(drawn, draws([1, 2, 3])) and not torch.equal(drawn[0], draws([4, 2, 3])[0])
    nuclei = []
    for row, (temperature, top_p) in enumerate(settings[:2]):
        p = torch.softmax(logits[row].double() / temperature, dim=-1)
        # the nucleus: the likeliest tokens until their mass reaches top_p (0.8 at T=0.7: the first two, 0.83)
        order = p.argsort(descending=True)
        kept = order[: int((p[order].cumsum(0) < top_p - 1e-9).sum()) + 1]
        nuclei.append(len(kept))
        counts = torch.bincount(drawn[row], minlength=6).double()
        assert counts.sum() == 6000 and counts[kept].sum() == 6000  # never outside the nucleus
        expected = p[kept] / p[kept].sum() * 6000
        assert chisquare(counts[kept].numpy(), expected.numpy()).pvalue > 1e-4
    assert nuclei == [2, 6] and torch.all(drawn[2] == 0)  # row 0's nucleus is cut; the greedy row takes its argmax


def test_a_repetition_penalty_counts_a_row_s_own_tokens_not_its_padding():
    """The penalty of ``transformers``' processor on each row's own tokens, while padding (masked) is not seen."""
    from transformers import RepetitionPenaltyLogitsProcessor

    scores = torch.tensor([[1.0, -2.0, 3.0, 0.5, -0.5]] * 2)
    ids = torch.tensor([[4, 4, 1, 2], [0, 3, 1, 3]])  # row 0: two pads (token 4), then its own 1 and 2
    valid = torch.tensor([[0, 0, 1, 1], [1, 1, 1, 1]])
    sampler = RowSampler([0, 0], [(0.0, 1.0)] * 2, penalty=1.3, valid=valid)
    got = sampler(ids, scores.clone())
    reference = RepetitionPenaltyLogitsProcessor(1.3)
    assert torch.allclose(got[0], reference(ids[:1, 2:], scores[:1].clone())[0])  # token 4 not penalised
    assert torch.allclose(got[1], reference(ids[1:], scores[1:].clone())[0])


def test_a_reply_is_the_same_alone_or_in_any_batch(monkeypatch):
    """On the tiny model: four requests of three replies decoded together (their system message through the model
    once), each alone, one batch split into several, and ``sample_chat`` all give the same replies; a request's
    replies differ from one another and with its seed; each stays within its own budget (one token a character)."""
    from tiny_model import build_tiny_lm

    lm = build_tiny_lm()
    asked = requests(4)
    together = sample_chats(lm, asked)
    assert together == [sample_chats(lm, [request])[0] for request in asked]
    assert together[0] == sample_chat(lm, *asked[0])
    monkeypatch.setattr(sampling, "SAMPLE_BATCH_TOKENS", 200)  # rows split over several batches
    assert sample_chats(lm, asked) == together
    for replies, (_, generation) in zip(together, asked):
        assert len(replies) == 3 and len(set(replies)) == 3
        assert all(len(reply) <= generation.max_tokens for reply in replies)
    messages, generation = asked[0]
    other_seed = Generation(generation.max_tokens, temperature=0.8, top_p=0.95, n=3, seed=99)
    assert sample_chats(lm, [(messages, other_seed)])[0] != together[0]


@pytest.mark.slow
def test_a_real_rephrasers_requests_get_the_same_replies_in_one_batch(lm):
    """On the packaged SmolLM2: the rephraser's instruction (system message and worked examples, shared) for three
    questions of two replies each, decoded together and each alone: the same replies, real text."""
    import yaml

    from posixlab.rephrase import Instruction
    from posixlab.rephrase.base import request_seed
    from posixlab.rephrase.config import INSTRUCTIONS

    instruction = Instruction.from_dict(yaml.safe_load((INSTRUCTIONS / "default.yaml").read_text()))
    asked = [(instruction.messages(text, 3), Generation(40, temperature=0.8, top_p=0.95, n=2,
                                                        seed=request_seed(0, text, 0)))
             for text in ("Which planet is known as the Red Planet?", "What is the capital of France?",
                          "Who wrote the play Hamlet?")]
    together = sample_chats(lm, asked)
    assert together == [sample_chats(lm, [request])[0] for request in asked]
    assert all(reply.strip() for replies in together for reply in replies)
