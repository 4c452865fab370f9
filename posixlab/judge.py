"""A judge reads a finished POSIX run: which responses that differ from the original prompt's say the same thing.

ψ sees tokens: "(B)" and "B. Wireless security", or two wordings of one recipe, are different responses to it. An
evaluator that reads meaning may call them the same, and measured sensitivity then shrinks ("Flaw or Artifact?";
arXiv 2605.02038: log-probability sensitivity can overstate judged sensitivity). ``posixlab judge RUN_DIR`` asks a
judge model, for every prompt set of a run, whether each variant's response gives the same answer as the first
prompt's (the original's), and reports beside ψ:

- ``identical_share``: the variants whose response is the original's, text for text (what ψ counts as the same);
- ``judged_share``: the variants judged to say the same (identical ones count, and are never asked): a judged
  consistency rate against the original, per set and its mean over the sets;
- ``judged_away``: the share of all variants whose response differs but was judged the same, the part of the
  measured change an evaluator reading meaning would not see;
- Spearman's ρ between a set's ψ and its judged inconsistency (1 − ``judged_share``): whether ψ ranks the sets as the
  judge does.

The judge is any model that writes replies to a chat (``posixlab.backends.open_to_generate``: a packaged or hub model
in this process, a vLLM server, a chat API), asked greedily (temperature 0) with ``INSTRUCTION``; its reply is read
by ``parse_verdict`` (a first word other than yes or no is ``unparsed``, counted and left out of the shares).
``both_orders`` asks each pair twice, the original's response first and second, and calls it the same only when both
say yes (LLM judges favour a position). A set's requests go to the judge together (``judge_set``'s ``ask``): in this
process their common prefix runs once and they decode in one batch, and a server gets ``max_concurrency`` requests
at once, several sets' where one set has fewer (``judge_sets``; ``posixlab.backends.replies_and_first_tokens``).
Verdicts go to ``judge.jsonl`` in the run's folder as each set is judged, so a stopped judge goes on from where it
stopped; the file holds one judge's verdicts (its ``key``), each row with a digest of what it judged
(``judged_digest``), so that a set whose responses changed since (the run run again in its folder) is judged again.

**Scores, calibrated on the decoys.** Where the judge's backend gives the probabilities of a reply's first token (a
model in this process; a chat API that returns ``top_logprobs``), each verdict also keeps ``p_same``, P(yes) / (P(yes) +
P(no)) over the first token's 20 likeliest (``first_token_odds``). Small judges say yes (or no) to everything, so their
words are useless, but their scores may still rank the pairs. ``judge_scores`` reads them against the controls: the
decoys' scores are what the judge gives responses to another question, so a pair is *calibrated the same* when its
score is above the decoys' conformal (1 − α) quantile (``conformal_threshold``): a response as unrelated as a decoy is
called the same with probability at most α, whatever the judge's bias. It also reports two AUCs: the run's differing
pairs against the decoys, and (where the run read options) the pairs the parser reads as one option against those it
reads as different options, a clean measure of whether the judge tells them apart (0.5: it does not).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from posixlab.errors import ConfigError, ModelUnavailableError
from posixlab.models.fetch_errors import said_of
from posixlab.results import SETS_FILE, iter_records
from posixlab.results import SUMMARY_FILE as RUN_SUMMARY_FILE

ROWS_FILE = "judge.jsonl"
SUMMARY_FILE = "judge.json"
DEFAULT_JUDGE = "qwen2.5-coder-1.5b-instruct"  # the strongest packaged instruct model (the paraphrases' writer too)
REPLY_TOKENS = 4  # "Yes", a leading space or "**" around it: a verdict, not an essay
TOP_TOKENS = 20  # the first token's likeliest alternatives a judge's P(yes) is read from (OpenAI's most)
ALPHA = 0.05  # the calibrated verdicts' rate of calling a decoy-like response the same

SYSTEM = "You compare two responses to the same task. You reply with one word: Yes or No."
INSTRUCTION = ("Prompt A:\n{first_prompt}\n\nResponse A:\n{first}\n\n"
               "Prompt B:\n{second_prompt}\n\nResponse B:\n{second}\n\n"
               "The two prompts ask the same thing in different forms (options may be labelled or ordered "
               "differently). Do responses A and B give the same answer, with the same meaning? Wording, formatting "
               "and length may differ. Reply Yes or No.")
PLACEHOLDERS = ("{first_prompt}", "{first}", "{second_prompt}", "{second}")

_VERDICT = re.compile(r"^[\W_]*(yes|no)\b", re.IGNORECASE)


def parse_verdict(reply: str) -> bool | None:
    """True for a reply whose first word is yes, False for no, None for anything else (unparsed).

    >>> parse_verdict("Yes."), parse_verdict(" **No**, they differ"), parse_verdict("noted"), parse_verdict("A")
    (True, False, None, None)
    """
    found = _VERDICT.match(reply or "")
    return None if found is None else found.group(1).lower() == "yes"


def first_token_odds(tokens: list[tuple[str, float]] | None) -> float | None:
    """P(yes) / (P(yes) + P(no)) from a reply's first-token alternatives (token text, log-probability): a token is yes
    or no by its letters, any case, around spaces and marks (" Yes", "**No"). None where neither is among them.

    >>> import math
    >>> round(first_token_odds([("Yes", math.log(0.6)), (" yes", math.log(0.1)), ("No", math.log(0.2)),
    ...                         ("Maybe", math.log(0.05))]), 6)
    0.777778
    >>> first_token_odds([("The", -0.1)]), first_token_odds(None)
    (None, None)
    """
    mass = {"yes": 0.0, "no": 0.0}
    for token, logprob in tokens or []:
        word = re.sub(r"[\W_]", "", token).lower()
        if word in mass:
            mass[word] += math.exp(logprob)
    total = mass["yes"] + mass["no"]
    return mass["yes"] / total if total > 0 else None


def judge_messages(first: tuple[str, str], second: tuple[str, str], instruction: str = INSTRUCTION) -> list[dict]:
    """The chat the judge answers for one pair of (prompt, response): each response beside the prompt it answers (a
    format variant's "b" is another option than the original's "B")."""
    content = instruction.format(first_prompt=first[0], first=first[1], second_prompt=second[0], second=second[1])
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": content}]


def same_response(a: dict, b: dict) -> bool:
    """Identical responses (never sent to the judge): the same token ids where the run kept them (what ψ counts as
    the same), else the same text once the white space at its ends is dropped (a chat API's)."""
    if a.get("token_ids") is not None and b.get("token_ids") is not None:
        return a["token_ids"] == b["token_ids"]
    return a["text"].strip() == b["text"].strip()


def judge_set(record: dict, ask: Callable[[list[list[dict]]], list], *, instruction: str = INSTRUCTION,
              both_orders: bool = False, decoy: str | list[str] | None = None) -> dict:
    """The verdicts for one set (a record of ``sets.jsonl``): each variant's response against the first prompt's
    (a prompt the run did not ask is left out). ``ask(chats)`` is the judge: for a list of chats, its answers in that
    order, each a reply or (reply, P(yes) or None). It is asked once with every chat that shows the original first (the
    variants', then the control's), so that it can share their common prefix or send them at once, and with
    ``both_orders`` once more with the order turned. ``decoy``: a response to another set's question, shown as a
    response to this one's (the control: a judge worth reading says No), or a list of them (the first's verdict is
    ``control``, the others' ``more_controls``). A pair's ``p_same`` is its lowest P(yes) over the orders asked
    (None where one has none).

    >>> record = {"set_id": "s", "set_index": 0, "psi": 0.5, "prompts": [{"text": "2+2?"}] * 5,
    ...           "responses": [{"text": t} for t in ("4", " 4", "four", "5")] + [{"text": None, "asked": False}]}
    >>> row = judge_set(record, lambda chats: ["Yes" if "four" in m[1]["content"] else "No" for m in chats],
    ...                 decoy="Paris")
    >>> [v["equivalent"] for v in row["verdicts"]], row["identical_share"], row["judged_share"], row["asked"]
    ([True, True, False], 0.333333, 0.666667, 3)
    >>> row["control"]
    {'replies': ['No'], 'equivalent': False, 'p_same': None}
    """
    return judge_sets([(record, decoy)], ask, instruction=instruction, both_orders=both_orders)[0]


def judge_sets(sets: list[tuple[dict, str | list[str] | None]], ask: Callable[[list[list[dict]]], list], *,
               instruction: str = INSTRUCTION, both_orders: bool = False) -> list[dict]:
    """``judge_set`` of each (record, decoy) of ``sets``, the judge asked once (once an order) with all their chats:
    a server's requests for several sets in flight at once."""
    orders = [False, True] if both_orders else [False]
    planned = [_pairs(record, decoy) for record, decoy in sets]
    every = [pair for _, pairs in planned for pair in pairs]
    answered = [_answers(ask, [judge_messages(*((b, a) if turned else (a, b)), instruction) for _, a, b in every])
                for turned in orders] if every else []
    rows, start = [], 0
    for (record, _), (verdicts, pairs) in zip(sets, planned):
        controls = []
        for k, (verdict, _, _) in enumerate(pairs, start):
            answers = [by_order[k] for by_order in answered]
            read = [parse_verdict(reply) for reply, _ in answers]
            scores = [p for _, p in answers]
            found = {"replies": [reply for reply, _ in answers], "equivalent": None if None in read else all(read),
                     "p_same": None if None in scores else min(scores)}
            if verdict is None:
                controls.append(found)
            else:  # the keys in the order they have always been written: prompt, identical, the verdict, parser_same
                verdict.update({**found, "parser_same": verdict.pop("parser_same")})
        start += len(pairs)
        rows.append({"set_id": record["set_id"], "set_index": record["set_index"],
                     "variant_type": record.get("variant_type"), "psi": record.get("psi"),
                     "asked": len(pairs) * len(orders), **set_shares(verdicts), "verdicts": verdicts,
                     "control": controls[0] if controls else None,
                     **({"more_controls": controls[1:]} if len(controls) > 1 else {})})
    return rows


def controls_of(row: dict) -> list[dict]:
    """A judged set's control verdicts: ``control`` and, with more than one decoy a set, ``more_controls``."""
    return ([row["control"]] if row.get("control") else []) + list(row.get("more_controls") or [])


def _pairs(record: dict, decoy: str | list[str] | None) -> tuple[list[dict], list[tuple]]:
    """A set's verdicts to fill (identical responses already filled) and the pairs to ask about: (the verdict it
    fills, None for the control; first, second, each (prompt, response)), the variants' in order, then the control."""
    prompts, responses = record["prompts"], record["responses"]
    original = responses[0]
    preds = [_greedy_pred(a) for a in record.get("answers") or []]  # the run's own reading, where it has options
    verdicts, pairs = [], []
    for i, response in enumerate(responses[1:], 1):
        if original["text"] is None or response["text"] is None:
            continue  # a prompt the run did not ask (a budgeted run, a race): nothing to judge
        if same_response(response, original):
            verdicts.append({"prompt": i, "identical": True, "equivalent": True, "replies": []})
            continue
        # the check: both responses read as an option by the run's parser, the same option or not
        parser_same = preds[0] == preds[i] if len(preds) > i and None not in (preds[0], preds[i]) else None
        verdicts.append({"prompt": i, "identical": False, "parser_same": parser_same})
        pairs.append((verdicts[-1], (prompts[0]["text"], original["text"]), (prompts[i]["text"], response["text"])))
    decoys = [decoy] if isinstance(decoy, str) else list(decoy or [])
    for text in dict.fromkeys(d for d in decoys if d is not None):  # each distinct decoy once
        if original["text"] is not None and text.strip() != original["text"].strip():
            pairs.append((None, (prompts[0]["text"], original["text"]), (prompts[0]["text"], text)))
    return verdicts, pairs


def _answers(ask: Callable, chats: list[list[dict]]) -> list[tuple[str, float | None]]:
    """``ask(chats)`` as (reply, P(yes) or None) pairs, one a chat; a judge that answers otherwise is an error."""
    answers = list(ask(chats))
    if len(answers) != len(chats):
        raise ValueError(f"the judge answered {len(answers)} of {len(chats)} chats asked together")
    return [a if isinstance(a, tuple) else (a, None) for a in answers]


def set_shares(verdicts: list[dict]) -> dict:
    """A set's shares: identical and judged the same (over the verdicts read), and the count unparsed."""
    read = [v for v in verdicts if v["equivalent"] is not None]
    identical = sum(v["identical"] for v in verdicts)
    return {"identical_share": round(identical / len(verdicts), 6) if verdicts else None,
            "judged_share": round(sum(v["equivalent"] for v in read) / len(read), 6) if read else None,
            "unparsed": len(verdicts) - len(read)}


def judge_summary(rows: list[dict]) -> dict:
    """The run's numbers from its judged sets (``judge_set`` rows).

    >>> rows = [{"psi": 0.2, "identical_share": 0.5, "judged_share": 1.0, "unparsed": 0, "asked": 1,
    ...          "verdicts": [{"identical": True, "equivalent": True}, {"identical": False, "equivalent": True}]},
    ...         {"psi": 1.0, "identical_share": 0.0, "judged_share": 0.0, "unparsed": 0, "asked": 2,
    ...          "verdicts": [{"identical": False, "equivalent": False}] * 2}]
    >>> s = judge_summary(rows)
    >>> s["identical_share"], s["judged_share"], s["judged_away"], s["differing_judged_same"], s["spearman"]
    (0.25, 0.5, 0.25, 0.333333, None)
    >>> s["controls"], s["control_judged_same"]  # no decoys asked
    (0, None)
    """
    verdicts = [v for row in rows for v in row["verdicts"]]
    differing = [v for v in verdicts if not v["identical"] and v["equivalent"] is not None]
    controls = [c["equivalent"] for r in rows for c in controls_of(r) if c["equivalent"] is not None]
    checked = [v for v in differing if v.get("parser_same") is not None]
    away = [None if r["judged_share"] is None else _judged_away(r) for r in rows]
    return {"sets": len(rows), "variants": len(verdicts), "differing": sum(not v["identical"] for v in verdicts),
            "asked": sum(r["asked"] for r in rows),
            "unparsed": sum(r["unparsed"] for r in rows), "psi": _mean(r.get("psi") for r in rows),
            "identical_share": _mean(r["identical_share"] for r in rows),
            "judged_share": _mean(r["judged_share"] for r in rows),
            "judged_share_ci95": share_interval([r["judged_share"] for r in rows]), "judged_away": _mean(away),
            "differing_judged_same": round(sum(v["equivalent"] for v in differing) / len(differing), 6)
            if differing else None, "spearman": _spearman(rows), "controls": len(controls),
            "control_judged_same": round(sum(controls) / len(controls), 6) if controls else None,
            **_parser_check(checked)}


def _mean(values) -> float | None:
    """The mean of the values that are not None, rounded as the summaries keep numbers; None without one."""
    values = [v for v in values if v is not None]
    return round(sum(values) / len(values), 6) if values else None


def share_interval(shares: list[float | None]) -> list[float] | None:
    """The 95 % interval of the judged share (its mean over the sets that have one): the expanded percentile
    bootstrap over the sets, seeded (``metrics.stats.bootstrap_ci``, as ``posixlab compare`` reads a change: judged
    runs are often a few sets, where the plain interval is too narrow; on 2 to 4 sets the t interval), within 0 and 1;
    None below two sets.

    >>> share_interval([1.0, 1.0, 1.0]), share_interval([0.5, None])
    ([1.0, 1.0], None)
    """
    from posixlab.metrics.stats import bootstrap_ci

    values = [v for v in shares if v is not None]
    return [round(min(1.0, max(0.0, v)), 6) for v in bootstrap_ci(values, expanded=True)] if len(values) > 1 else None


def conformal_threshold(decoys: list[float], alpha: float = ALPHA) -> float | None:
    """The score a pair must exceed to be called the same: the ⌈(n + 1)(1 − α)⌉-th smallest of the n decoys' scores.
    A pair whose score is exchangeable with the decoys' (a response as unrelated as theirs) exceeds it with
    probability at most α. None with fewer than ⌈1/α⌉ − 1 decoys (19 at α = 0.05): no threshold can promise α.

    >>> conformal_threshold([k / 20 for k in range(1, 20)]), conformal_threshold([0.5] * 18)
    (0.95, None)
    >>> conformal_threshold([0.9, 0.2, 0.4], alpha=0.25)
    0.9
    """
    n = len(decoys)
    k = math.ceil((n + 1) * (1 - alpha) - 1e-9)  # (n + 1)(1 − α) may be a whole number off by a rounding error
    return sorted(decoys)[k - 1] if 1 <= k <= n else None


def auc(higher: list[float], lower: list[float]) -> float | None:
    """P(a score of ``higher`` > one of ``lower``), ties counting half: the Mann-Whitney U over the pairs (scipy).
    None where either is empty.

    >>> auc([0.9, 0.8, 0.3], [0.3, 0.1])
    0.916667
    """
    if not higher or not lower:
        return None
    from scipy.stats import mannwhitneyu

    return round(float(mannwhitneyu(higher, lower).statistic) / (len(higher) * len(lower)), 6)


def judge_scores(rows: list[dict], alpha: float = ALPHA) -> dict | None:
    """What the judge's scores (``p_same``) say, where it gave any: the AUC of the run's differing pairs over the
    decoys, the AUC of the pairs the parser reads as one option over those it reads as different ones, and the
    verdicts calibrated on the decoys (``conformal_threshold``): a differing pair is the same when its score is above
    the threshold, and the shares are ``judge_summary``'s over those verdicts. None where nothing was scored."""
    verdicts = [v for row in rows for v in row["verdicts"] if not v["identical"]]
    scored = [v for v in verdicts if v.get("p_same") is not None]
    decoys = [c["p_same"] for r in rows for c in controls_of(r) if c.get("p_same") is not None]
    if not scored and not decoys:
        return None
    threshold = conformal_threshold(decoys, alpha)
    found = {"scored": len(scored), "unscored": len(verdicts) - len(scored), "decoys": len(decoys),
             "decoy_auc": auc([v["p_same"] for v in scored], decoys),
             "parser_auc": auc([v["p_same"] for v in scored if v.get("parser_same") is True],
                               [v["p_same"] for v in scored if v.get("parser_same") is False]),
             "alpha": alpha, "threshold": threshold, "calibrated": None}
    if threshold is not None:
        def recalled(v):
            same = None if v.get("p_same") is None else v["p_same"] > threshold
            return v if v["identical"] else {**v, "equivalent": same}

        calibrated = [{**r, "verdicts": [recalled(v) for v in r["verdicts"]]} for r in rows]
        calibrated = [{**r, **set_shares(r["verdicts"])} for r in calibrated]
        summary = judge_summary(calibrated)
        found["calibrated"] = {k: summary[k] for k in ("judged_share", "judged_away", "differing_judged_same",
                                                       "parser_same_judged_same", "parser_different_judged_different")}
    return found


def judge_warnings(summary: dict, least: int = 3) -> list[str]:
    """What the judge's controls say against reading its shares: a decoy judged the same more often than not, a side
    of the parser check judged wrongly more often than not (each with at least ``least`` pairs), or replies neither
    yes nor no to most of the differing responses (the shares are over the verdicts read).

    >>> judge_warnings({"controls": 3, "control_judged_same": 1.0, "parser_checked": 0})
    ["the judge calls another question's response the same in 3 of 3 controls: it says yes regardless"]
    >>> judge_warnings({"controls": 0, "differing": 49, "unparsed": 45})
    ['the judge replied neither yes nor no about 45 of the 49 differing responses: its shares rest on the 4 it answered']
    """
    said = []
    differing, unparsed = summary.get("differing") or 0, summary.get("unparsed") or 0
    if differing >= least and unparsed > differing / 2:
        said.append(f"the judge replied neither yes nor no about {unparsed} of the {differing} differing responses: "
                    f"its shares rest on the {differing - unparsed} it answered")
    if summary["controls"] >= least and summary["control_judged_same"] > 0.5:
        said.append(f"the judge calls another question's response the same in "
                    f"{round(summary['control_judged_same'] * summary['controls'])} of {summary['controls']} "
                    f"controls: it says yes regardless")
    for key, words in (("parser_same_judged_same", "the same option, by the run's parser, judged the same"),
                       ("parser_different_judged_different", "different options, by the parser, judged different")):
        pairs = summary.get(f"{key}_pairs") or 0
        if pairs >= least and summary[key] < 0.5:
            said.append(f"{words} in {round(summary[key] * pairs)} of {pairs} pairs: the judge misreads them")
    return said


def _parser_check(checked: list[dict]) -> dict:
    """The judge against the run's answer parser, on differing responses both read as an option: how often they
    agree, and the judge's verdicts on the pairs the parser reads as the same option and as different ones."""
    def share(pairs, wanted):
        return round(sum(v["equivalent"] == wanted for v in pairs) / len(pairs), 6) if pairs else None

    same = [v for v in checked if v["parser_same"]]
    different = [v for v in checked if not v["parser_same"]]
    return {"parser_checked": len(checked),
            "parser_agreement": round(sum(v["equivalent"] == v["parser_same"] for v in checked) / len(checked), 6)
            if checked else None,
            "parser_same_judged_same": share(same, True), "parser_same_judged_same_pairs": len(same),
            "parser_different_judged_different": share(different, False),
            "parser_different_judged_different_pairs": len(different)}


def _judged_away(row: dict) -> float:
    """The share of a set's variants read by the judge whose response differs and was judged the same."""
    read = [v for v in row["verdicts"] if v["equivalent"] is not None]
    return sum(v["equivalent"] and not v["identical"] for v in read) / len(read)


def _spearman(rows: list[dict]) -> dict | None:
    """Spearman's ρ (and its p-value) between the sets' ψ and judged inconsistency; None with fewer than three sets
    that have both, or where either is constant (no ranking to compare)."""
    pairs = [(r["psi"], 1 - r["judged_share"]) for r in rows
             if r.get("psi") is not None and r["judged_share"] is not None]
    if len(pairs) < 3 or len({p for p, _ in pairs}) < 2 or len({q for _, q in pairs}) < 2:
        return None
    from scipy.stats import spearmanr

    result = spearmanr([p for p, _ in pairs], [q for _, q in pairs])
    return {"rho": round(float(result.statistic), 6), "p_value": round(float(result.pvalue), 6), "sets": len(pairs)}


def judge_agreement(rows: list[dict], other: list[dict]) -> dict:
    """How two judges of one run agree (``rows`` and ``other``: each judge's ``judge.jsonl`` rows), over the differing
    responses both read (identical ones are never asked; a reply neither yes nor no is left out): the share of equal
    verdicts, Cohen's κ (that share beyond what two judges saying yes at their own rates would reach by chance), the
    two-by-two counts, and over the sets both have a share for, each judge's mean judged share and Spearman's ρ
    between their per-set shares. How much a judged share is the judge's, not the model's.

    >>> def judged(*verdicts):  # one set: the variants' verdicts, True = the same; "=" an identical response
    ...     return [{"set_id": "s", "judged_share": None, "verdicts": [
    ...         {"prompt": i, "identical": v == "=", "equivalent": True if v == "=" else v}
    ...         for i, v in enumerate(verdicts, 1)]}]
    >>> a = judged(True, True, False, None, "=")
    >>> b = judged(True, False, False, True, "=")
    >>> agreement = judge_agreement(a, b)   # 3 pairs both read: 2 agree; yes at 2/3 and 1/3: chance 4/9
    >>> agreement["pairs"], agreement["agreement"], agreement["kappa"]   # (2/3 - 4/9) / (1 - 4/9)
    (3, 0.666667, 0.4)
    >>> agreement["both_same"], agreement["only_this"], agreement["only_other"], agreement["neither"]
    (1, 1, 0, 1)
    """
    theirs = {(row["set_id"], v["prompt"]): v["equivalent"] for row in other for v in row["verdicts"]
              if not v["identical"] and v["equivalent"] is not None}
    pairs = [(v["equivalent"], theirs[key]) for row in rows for v in row["verdicts"]
             if not v["identical"] and v["equivalent"] is not None and (key := (row["set_id"], v["prompt"])) in theirs]
    counts = {"both_same": sum(a and b for a, b in pairs), "only_this": sum(a and not b for a, b in pairs),
              "only_other": sum(b and not a for a, b in pairs), "neither": sum(not a and not b for a, b in pairs)}
    observed = (counts["both_same"] + counts["neither"]) / len(pairs) if pairs else None
    kappa = None
    if pairs:
        mine, yours = sum(a for a, _ in pairs) / len(pairs), sum(b for _, b in pairs) / len(pairs)
        chance = mine * yours + (1 - mine) * (1 - yours)
        kappa = None if chance == 1 else round((observed - chance) / (1 - chance), 6)  # both constant: undefined
    shares = {row["set_id"]: row["judged_share"] for row in other}
    both = [(row["judged_share"], shares[row["set_id"]]) for row in rows
            if row["judged_share"] is not None and shares.get(row["set_id"]) is not None]
    from posixlab.metrics.stats import spearman

    rho = spearman([a for a, _ in both], [b for _, b in both])["rho"]  # NaN below 3 sets or for a constant share
    return {"pairs": len(pairs), "agreement": None if observed is None else round(observed, 6), "kappa": kappa,
            **counts, "sets": len(both), "judged_share": _mean(a for a, _ in both),
            "other_judged_share": _mean(b for _, b in both), "spearman": None if math.isnan(rho) else round(rho, 6)}


def other_judge(folder: str | Path) -> dict:
    """The summary of the judge in ``folder`` (``agreement_with``'s other judge); checked before anything is asked."""
    try:
        return json.loads((Path(folder) / SUMMARY_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        raise ConfigError(f"{folder} holds no judge's summary ({SUMMARY_FILE}): give the folder another judge of "
                          f"this run wrote (posixlab judge RUN --judge MODEL --out FOLDER)") from None


def agreement_with(out: str | Path, other: str | Path, summary: dict) -> dict:
    """``judge_agreement`` of the judge whose ``summary`` was written to ``out`` with the judge whose verdicts are in
    the folder ``other`` (``posixlab judge RUN --judge B --out DIR``: two judges of one run), the other's name and
    folder beside it. The two must have read the same run (its ``run_fingerprint``)."""
    theirs = other_judge(other)
    if theirs.get("run_fingerprint") != summary.get("run_fingerprint"):
        raise ConfigError(f"the judge in {other} read another run than this one (its run_fingerprint differs): "
                          f"agreement is over the same responses")
    if theirs["judge"]["key"] == summary["judge"]["key"]:
        raise ConfigError(f"{other} holds this same judge's verdicts: give the folder of another judge")
    return {"with": theirs["judge"]["model"], "folder": str(other),
            **judge_agreement(judged_rows(out, summary), judged_rows(other, theirs))}


@dataclass
class JudgeConfig:
    """A judge that reads a POSIX run as soon as it ends (``judge=`` on the command line: ``posixlab judge``'s options,
    asked in the same job, its verdicts in the run's folder, its numbers in the run's W&B run). ``model`` None: no
    judge. ``base_url``: a chat API serving ``model`` (its key in ``api_key_env``); else ``model`` is a packaged or
    configured name, a local folder or file, or a hub id, in this process once the run's model is closed."""

    model: str | None = None  # the judge; None: none
    base_url: str | None = None  # an OpenAI-compatible chat endpoint to ask, e.g. a vLLM server's .../v1
    api_key_env: str = "OPENAI_API_KEY"  # with base_url: the variable holding its key
    max_concurrency: int = 8  # with base_url: requests in flight at once (speed only, never a verdict)
    sets: int | None = None  # judge the first sets only; None: all
    both_orders: bool = False  # ask each pair twice, the original's response first and second
    instruction: str | None = None  # a file holding the judge's request; None: INSTRUCTION
    alpha: float = ALPHA  # the calibrated verdicts' rate of calling a decoy-like response the same
    decoys: int = 1  # controls a set: the next sets' original responses

    def instruction_text(self, flags: bool = False) -> str:
        """The judge's request, checked with the other options: a clear error before a run starts, naming the
        setting as the command line writes it (``judge.sets``; ``flags``: ``posixlab judge``'s ``--sets``)."""
        def named(key: str) -> str:
            return "--" + key.replace("_", "-") if flags else f"judge.{key}"

        if self.sets is not None and self.sets < 1:
            raise ConfigError(f"{named('sets')} must be at least 1, got {self.sets}")
        if self.max_concurrency < 1:
            raise ConfigError(f"{named('max_concurrency')} must be at least 1, got {self.max_concurrency}")
        try:
            text = Path(self.instruction).read_text(encoding="utf-8") if self.instruction else INSTRUCTION
        except OSError as exc:
            raise ConfigError(f"{named('instruction')}: {exc.strerror or exc} ({self.instruction}): a file holding "
                              f"the judge's request, with {', '.join(PLACEHOLDERS)}") from None
        check_options(text, self.alpha, self.decoys)
        return text


@dataclass(frozen=True)
class JudgeSettings:
    """Who judges and how; its ``key`` names the verdicts in ``judge.jsonl`` (a file holds one judge's)."""

    model: dict  # the judge's ModelSpec, as a dict
    instruction: str = INSTRUCTION
    both_orders: bool = False
    reply_tokens: int = REPLY_TOKENS
    decoys: int = 1  # decoys a set

    @property
    def key(self) -> str:
        fields = asdict(self)
        if fields["decoys"] == 1:  # one decoy a set, as every key before the setting had: those keys stay
            del fields["decoys"]
        return hashlib.sha256(json.dumps(fields, sort_keys=True, default=str).encode()).hexdigest()[:16]


def judge_run(folder: str | Path, spec, *, lm=None, sets: int | None = None, out: str | Path | None = None,
              instruction: str = INSTRUCTION, both_orders: bool = False, alpha: float = ALPHA, decoys: int = 1,
              cache_dir=None, progress: bool | str = True, flags: bool = True,
              opener: Callable | None = None) -> dict:
    """Judge the sets of the POSIX run in ``folder`` (the first ``sets`` by index; None: all) with the model ``spec``
    names (``lm``: that model, already open), writing ``judge.jsonl`` and ``judge.json`` to ``out`` (default: the
    run's folder); verdicts already on file for this judge are used, not asked again, and the model opens only if
    one is missing. ``alpha``: the calibrated verdicts' rate (``judge_scores``); ``decoys``: controls a set (the
    next sets' original responses; calibration at ``alpha`` needs ⌈1/α⌉ − 1 in all). Returns the summary
    (``judge.json``). ``flags``: errors name ``posixlab judge``'s options (``--base-url``); False, a run's
    ``judge.*`` settings. ``opener``: opens the judge's model where one is needed (``open_judge``'s, given to
    each cell of a sweep so that the model opens once); None: opened here. ``progress``: True, a bar; ``"lines"``,
    a plain line a wave of sets (logs of sweeps and cluster jobs); False, quiet."""
    from posixlab.backends import replies_and_first_tokens, system_folded
    from posixlab.openai_client import Generation

    folder, out = Path(folder), Path(out or folder)
    _check_options(folder, instruction, alpha, decoys)
    settings = JudgeSettings(_judge_fields(spec), instruction, both_orders, decoys=decoys)
    every = sorted(map(_what_is_judged, iter_records(folder, SETS_FILE, skip_unreadable=True)),
                   key=lambda r: r["set_index"])
    records = every[:sets] if sets is not None else every
    if not records:
        raise ConfigError(f"{folder / SETS_FILE} holds no finished prompt set to judge")
    out.mkdir(parents=True, exist_ok=True)
    shown = [_decoys(every, k, settings.decoys) for k in range(len(records))]
    digests = {r["set_id"]: judged_digest(r, d) for r, d in zip(records, shown)}
    done = _rows_still_judged(out / ROWS_FILE, settings.key, digests)
    # opened before anything is written: a judge that cannot open (no chat template, a dead endpoint) leaves the
    # folder as it was
    if lm is None and any(r["set_id"] not in done for r in records):
        lm = opener() if opener is not None else open_judge(spec, cache_dir, flags)
    greedy = Generation(settings.reply_tokens, temperature=0.0)

    def ask(chats: list[list[dict]]) -> list[tuple[str, float | None]]:
        return [(reply, first_token_odds(tokens))
                for reply, tokens in replies_and_first_tokens(lm, chats, greedy, TOP_TOKENS)]

    rows = dict(done)
    missing = [(k, r) for k, r in enumerate(records) if r["set_id"] not in done]

    def judge_wave(wave: list[tuple[int, dict]]) -> list[dict]:  # each row as judge.jsonl keeps it
        judged = judge_sets([(r, shown[k]) for k, r in wave], ask, instruction=instruction, both_orders=both_orders)
        return [{"key": settings.key, "judged": digests[row["set_id"]], **row} for row in judged]

    for row in _judge_missing(missing, len(records), lm, out / ROWS_FILE, spec.name, progress, judge_wave):
        rows[row["set_id"]] = row
    rows = [rows[r["set_id"]] for r in records]
    summary = {"run": str(folder), "judge": {"model": spec.name, "key": settings.key, "both_orders": both_orders,
                                             "decoys": decoys,
                                             "instruction_sha256": hashlib.sha256(instruction.encode()).hexdigest(),
                                             "identity": getattr(lm, "identity", None),
                                             "system_folded": system_folded(lm)},
               "sets_in_run": len(every), "run_fingerprint": _run_fingerprint(folder), **judge_summary(rows),
               "scores": judge_scores(rows, alpha)}
    summary["warnings"] = judge_warnings(summary)
    (out / SUMMARY_FILE).write_text(json.dumps(summary, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return summary


def _rows_still_judged(path: Path, key: str, digests: dict[str, str]) -> dict[str, dict]:
    """The verdicts on file (``_rows_on_file``) still of the sets as they are now: a set whose digest changed (the
    folder's run was run again with other responses: its sets.jsonl is rewritten, judge.jsonl not) is left out, to
    be judged again, and said once."""
    done = _rows_on_file(path, key)
    changed = [s for s, row in done.items() if s in digests and row.get("judged", digests[s]) != digests[s]]
    if changed:
        print(f"posixlab: {len(changed)} set(s) in {path} were judged on other prompts or responses than the run's "
              f"now: judged again", file=sys.stderr)
    return {s: row for s, row in done.items() if s not in changed}


def _judge_missing(missing: list[tuple[int, dict]], total: int, lm, path: Path, name: str, progress: bool | str,
                   judge_wave: Callable[[list[tuple[int, dict]]], list[dict]]):
    """Judge the sets ``missing`` ((position, record)) a wave at a time (``_waves``; ``judge_wave``: a wave's rows),
    yielding each row; the rows are appended to ``path`` as each wave ends, so a stopped judge keeps every set it
    finished. ``progress``: True, a bar over ``total`` sets; ``"lines"``, a plain line a wave (sweeps,
    cluster logs, where a bar is a line of carriage returns); False, quiet."""
    from tqdm.auto import tqdm

    started, finished = time.monotonic(), total - len(missing)
    with open(path, "a", encoding="utf-8") as handle, \
            tqdm(total=total, initial=finished, desc=f"judging with {name}", unit="set",
                 disable=progress is not True, file=sys.stderr, leave=False) as bar:
        for wave in _waves(missing, lm):
            rows = judge_wave(wave)
            handle.writelines(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)
            handle.flush()
            bar.update(len(wave))
            finished += len(wave)
            if progress == "lines":
                print(f"posixlab: judging with {name}: {finished}/{total} sets, {time.monotonic() - started:.0f} s",
                      file=sys.stderr, flush=True)
            yield from rows


SET_COLUMNS = ("set_index", "set_id", "variant_type", "psi", "identical_share", "judged_share", "asked", "unparsed")


def judge_tracked(summary: dict, rows: list[dict]):
    """What a run tracker logs for a judge (``posixlab judge --wandb``): the summary's numbers (``judged_share``,
    ``spearman/rho``, ``scores/decoy_auc``, ``scores/calibrated/judged_share``, ``agreement/kappa``, ...), and a table
    with a row per judged set (``SET_COLUMNS``, then each variant's verdict as JSON); the files stay in the run's
    folder.

    >>> summary = {"sets": 1, "judged_share": 0.5, "spearman": None, "judge": {"model": "j"},
    ...            "scores": {"decoy_auc": 0.75, "calibrated": {"judged_share": 0.25}}}
    >>> rows = [{"set_index": 0, "set_id": "s", "psi": 0.2, "identical_share": 0.5, "judged_share": 0.5, "asked": 2,
    ...          "unparsed": 0, "verdicts": [{"equivalent": True}, {"equivalent": None}]}]
    >>> tracked = judge_tracked(summary, rows)
    >>> tracked.scalars
    {'sets': 1, 'judged_share': 0.5, 'scores/decoy_auc': 0.75, 'scores/calibrated/judged_share': 0.25}
    >>> tracked.rows
    [[0, 's', None, 0.2, 0.5, 0.5, 2, 0, '[true, null]']]
    """
    from posixlab.tasks.base import Tracked

    def numbers(block: dict | None, prefix: str = "") -> dict:
        out = {}
        for key, value in (block or {}).items():
            if isinstance(value, dict) and key in ("spearman", "scores", "calibrated", "agreement"):
                out.update(numbers(value, f"{prefix}{key}/"))
            elif isinstance(value, (int, float)) and not isinstance(value, bool):
                out[f"{prefix}{key}"] = value
        return out

    table = [[row.get(c) for c in SET_COLUMNS] + [json.dumps([v["equivalent"] for v in row["verdicts"]])]
             for row in rows]
    return Tracked(numbers(summary), table_name="judge_sets", columns=[*SET_COLUMNS, "verdicts"], rows=table,
                   artifact_type="judge")


def judged_rows(out: str | Path, summary: dict) -> list[dict]:
    """The rows of the sets ``summary`` judged (the first ``summary["sets"]`` by index of the judge's file in
    ``out``: a rerun with fewer ``--sets`` keeps more on file)."""
    rows = _rows_on_file(Path(out) / ROWS_FILE, summary["judge"]["key"]).values()
    return sorted(rows, key=lambda r: r["set_index"])[:summary["sets"]]


def verdicts_by_set(folder: str | Path, judged: dict | None) -> dict[str, dict]:
    """The rows of ``judge.jsonl`` in ``folder`` by set id, of the judge whose summary is ``judged`` (``read_judged``'s:
    None without a judge of this run); empty where there is none, or its verdicts cannot be read (the file gone, or
    another judge's)."""
    if not ((judged or {}).get("judge") or {}).get("key"):
        return {}
    try:
        return {row["set_id"]: row for row in judged_rows(folder, judged)}
    except (ConfigError, KeyError, TypeError):
        return {}


def _check_options(folder: Path, instruction: str, alpha: float, decoys: int) -> None:
    """What ``judge_run`` is given, checked before anything is read or opened."""
    if not (folder / SETS_FILE).is_file():
        raise ConfigError(f"{folder} has no {SETS_FILE}: posixlab judge reads a POSIX run's folder (its prompt sets "
                          f"and responses); a classification run's answers are labels, compared without a judge")
    check_options(instruction, alpha, decoys)


def check_options(instruction: str, alpha: float, decoys: int) -> None:
    """A judge's instruction, calibration rate and decoys, checked (before a run that ends with a judge starts)."""
    missing = [p for p in PLACEHOLDERS if p not in instruction]
    if missing:
        raise ConfigError(f"the judge's instruction must contain {', '.join(PLACEHOLDERS)} (each response beside "
                          f"the prompt it answers); it lacks {', '.join(missing)}")
    if not 0 < alpha < 1:
        raise ConfigError(f"alpha is the calibrated verdicts' rate of calling an unrelated response the same, "
                          f"between 0 and 1 (0.05 by default); got {alpha}")
    if decoys < 1:
        raise ConfigError(f"decoys are the judge's controls, at least 1 a set (more calibrate on fewer sets); got "
                          f"{decoys}")


def _decoys(every: list[dict], k: int, count: int) -> list[str | None]:
    """The decoys of set ``k``: the original responses of the ``count`` sets after it in the whole run (``--sets``
    does not move them), wrapping round, never its own.

    >>> every = [{"responses": [{"text": t}]} for t in "abc"]
    >>> _decoys(every, 0, 1), _decoys(every, 2, 2), _decoys(every, 1, 5), _decoys(every[:1], 0, 1)
    (['b'], ['a', 'b'], ['c', 'a'], [])
    """
    return [every[(k + j) % len(every)]["responses"][0]["text"] for j in range(1, min(count, len(every) - 1) + 1)]


def _waves(pending: list[tuple[int, dict]], lm) -> list[list[tuple[int, dict]]]:
    """The sets to judge, in order, in the groups the judge is asked at once: a set alone in this process (so what a
    batch holds depends on its set only: a resumed judge computes the same numbers); behind a server, enough sets to
    keep its ``max_concurrency`` requests in flight twice over (a set of 21 has 21 requests; a hosted API may take
    64 at once). A server that stops mid-wave loses that wave's answers, not the sets written before it."""
    from posixlab.backends import backend_of

    server = getattr(getattr(lm, "spec", None), "server", None)
    if lm is None or not backend_of(lm).remote or server is None:
        return [[item] for item in pending]
    want, waves, size = 2 * server.max_concurrency, [], 0
    for item in pending:
        if not waves or size >= want:
            waves.append([])
            size = 0
        waves[-1].append(item)
        size += len(item[1]["responses"])  # its variants and its control, at most
    return waves


def _judge_fields(spec) -> dict:
    """The judge's settings as its key holds them, with its requests in flight at the default (8, as every key before
    it could be set had): the same judge asked faster is the same judge, and reuses its verdicts."""
    from posixlab.models.loading import ServerSettings

    fields = asdict(spec)
    fields["server"] = {**fields["server"], "max_concurrency": ServerSettings.max_concurrency}
    return fields


def _run_fingerprint(folder: Path) -> str | None:
    """The judged run's ``config_fingerprint`` (its summary's), or None for a run stopped before its summary."""
    try:
        return json.loads((folder / RUN_SUMMARY_FILE).read_text(encoding="utf-8")).get("config_fingerprint")
    except (OSError, ValueError, AttributeError):
        return None


def read_judged(folder: str | Path, run_summary: dict) -> tuple[dict | None, str | None]:
    """(the judge's summary in a run's folder, or None; why it is not shown, or None): a ``judge.json`` written for
    an earlier run in the same folder (another configuration: its ``run_fingerprint`` is not the run's) is not this
    run's judge; one from before the fingerprint was recorded is taken as it is.

    >>> import tempfile
    >>> folder = Path(tempfile.mkdtemp())
    >>> _ = (folder / SUMMARY_FILE).write_text('{"judged_share": 0.5, "run_fingerprint": "aa"}')
    >>> read_judged(folder, {"config_fingerprint": "aa"})[0]["judged_share"], read_judged(folder, {})[1]
    (0.5, None)
    >>> read_judged(folder, {"config_fingerprint": "bb"})[1].split(":")[0]
    'judge.json was written for an earlier run in this folder (another configuration)'
    >>> import shutil; shutil.rmtree(folder)
    """
    try:
        judged = json.loads((Path(folder) / SUMMARY_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):  # no judge, or a file cut short
        return None, None
    if not isinstance(judged, dict):
        return None, None
    written_for, run = judged.get("run_fingerprint"), run_summary.get("config_fingerprint")
    if written_for and run and written_for != run:
        return None, (f"{SUMMARY_FILE} was written for an earlier run in this folder (another configuration): not "
                      f"shown; posixlab judge {folder} judges this one (its verdicts of unchanged sets are reused)")
    return judged, None


def judged_digest(record: dict, decoys: list[str]) -> str:
    """What a set's verdicts were given, in 16 hex digits: its prompts, its responses (texts and token ids) and the
    decoys shown with it. A row of ``judge.jsonl`` whose digest is not the set's now (the run was run again in its
    folder, with another model or setting) is judged again; a row written before rows had one is taken as it is.

    >>> one = {"prompts": [{"text": "2+2?"}], "responses": [{"text": "4", "token_ids": [19]}]}
    >>> judged_digest(one, ["5"]) == judged_digest(dict(one), ["5"]), judged_digest(one, ["5"]) == judged_digest(one, [])
    (True, False)
    """
    shown = {"prompts": [p["text"] for p in record["prompts"]],
             "responses": [(r.get("text"), r.get("token_ids")) for r in record["responses"]], "decoys": decoys}
    return hashlib.sha256(json.dumps(shown, ensure_ascii=False).encode()).hexdigest()[:16]


def _what_is_judged(record: dict) -> dict:
    """A set record without its matrix, log-probabilities and variant records (a paper-sized cell's file is most of a
    gigabyte): the prompts' texts and the responses' texts and token ids."""
    return {"set_id": record["set_id"], "set_index": record["set_index"], "variant_type": record.get("variant_type"),
            "psi": record.get("psi"), "prompts": [{"text": p["text"]} for p in record["prompts"]],
            "responses": [{"text": r.get("text"), "token_ids": r.get("token_ids")} for r in record["responses"]],
            "answers": [{"by_greedy": {"pred": _greedy_pred(a)}} for a in record.get("answers") or []]}


def _greedy_pred(answer) -> str | None:
    """The option a greedy response was read as, in the original's labels (``posixlab.answers``), or None."""
    return ((answer or {}).get("by_greedy") or {}).get("pred")


def open_judge(spec, cache_dir=None, flags: bool = True):
    """The judge's model, opened to write replies (``posixlab.backends.open_to_generate``); a chat API's errors name
    the judge's endpoint and the setting to fix (``judge_role``)."""
    from posixlab.backends import open_to_generate

    print(f"posixlab: opening the judge {spec.name}", file=sys.stderr)
    role = {"role": judge_role(flags)} if spec.backend == "chat" else {}
    try:
        return open_to_generate(spec, cache_dir, **role)
    except ModelUnavailableError as exc:  # a hub model's hints name the judge's setting, not the run's model's
        raise ModelUnavailableError(said_of(str(exc), "the judge's", judge_role(flags).model_setting)) from None


def judge_role(flags: bool = True):
    """How a chat API judge's failures read: the endpoint named as the judge's, the setting to fix as it was given
    (``flags``: ``posixlab judge``'s ``--base-url``; else a run's ``judge.base_url``), and what a rerun keeps."""
    from posixlab.openai_client import Role

    if flags:
        return Role(server="judge's chat endpoint", settings="judge", who="posixlab judge", model_setting="--judge",
                    kept="the verdicts of the sets judged so far are kept in judge.jsonl, so a rerun asks only the "
                         "rest", remedy="Start the server or fix --base-url")
    return Role(server="judge's chat endpoint", settings="judge", who="the run's judge (judge=)",
                model_setting="judge.model", kept="the run's results are written and the verdicts so far kept in "
                "judge.jsonl: posixlab judge RUN_DIR --judge MODEL --base-url URL asks only the rest",
                remedy="Start the server or fix judge.base_url")


def _rows_on_file(path: Path, key: str) -> dict[str, dict]:
    """The verdicts already in ``path`` by set id; another judge's is an error (its verdicts are kept, unmixed). A
    last line cut short by a judge stopped while writing is skipped: that set is judged again."""
    if not path.is_file():
        return {}
    rows = {}
    for row in iter_records(path.parent, path.name, skip_unreadable=True):
        if row.get("key") != key:
            raise ConfigError(f"{path} holds another judge's verdicts (key {row.get('key')}, this judge's {key}: "
                              f"another model, instruction or --both-orders); give --out another folder, or delete "
                              f"the file to judge again")
        rows[row["set_id"]] = row
    return rows


# (key of the summary, what the table calls it): ``posixlab judge``'s table and the report page's section
JUDGE_ROWS = (("psi", "mean ψ"), ("identical_share", "identical to the original's response"),
              ("judged_share", "judged the same (judged consistency)"),
              ("judged_share_ci95", "… its 95% interval over the sets (expanded bootstrap)"),
              ("judged_away", "differing but judged the same (judged away)"),
              ("differing_judged_same", "of the differing responses, judged the same"),
              ("control_judged_same", "control: another question's response judged the same (a good judge: 0)"),
              ("parser_agreement", "agreement with the run's answer parser (options read from both responses)"),
              ("parser_same_judged_same", "… the same option by the parser, judged the same (a good judge: 1)"),
              ("parser_different_judged_different", "… different options by the parser, judged different (1)"))


# the judge's scores (``judge_scores``), where it gave any: how it ranks the pairs, then its calibrated verdicts
SCORE_ROWS = (("decoy_auc", "scores: differing pairs rated above decoys (AUC; 0.5: no higher)"),
              ("parser_auc", "scores: same option by the parser rated above different options (AUC; a good judge: 1)"))
CALIBRATED_ROWS = (("judged_share", "calibrated: judged the same"),
                   ("judged_away", "calibrated: differing but judged the same"),
                   ("parser_same_judged_same", "calibrated: … the same option by the parser, judged the same"),
                   ("parser_different_judged_different", "calibrated: … different options, judged different"))


def judge_rows(summary: dict) -> list[tuple[str, str]]:
    """(label, value as shown) for each number of the summary, Spearman's ρ, then the judge's scores where it gave
    any (a summary written before there were scores has none)."""
    def shown(block, key):
        value = block.get(key)
        return "n/a" if value is None else f"{value[0]:.3f} to {value[1]:.3f}" if isinstance(value, list) \
            else f"{value:.3f}"

    rho, scores = summary["spearman"], summary.get("scores")
    rows = [(label, shown(summary, key)) for key, label in JUDGE_ROWS]
    rows.append(("Spearman ρ, ψ vs judged inconsistency",
                 "n/a" if rho is None else f"{rho['rho']:+.3f} (p {rho['p_value']:.3g}, {rho['sets']} sets)"))
    rows += agreement_rows(summary.get("agreement"))
    if not scores:
        return rows
    rows += [(label, shown(scores, key)) for key, label in SCORE_ROWS]
    if scores["threshold"] is None:
        needed = math.ceil(1 / scores["alpha"]) - 1
        return rows + [("calibrated verdicts", f"n/a: {scores['decoys']} decoys, {needed} needed at "
                                               f"α = {scores['alpha']:g} (more sets, or --decoys)")]
    rows.append(("calibration: P(yes) above", f"{scores['threshold']:.6g} ({scores['decoys']} decoys, "
                                              f"α = {scores['alpha']:g})"))
    return rows + [(label, shown(scores["calibrated"], key)) for key, label in CALIBRATED_ROWS]


def agreement_rows(agreement: dict | None) -> list[tuple[str, str]]:
    """(label, value as shown) of an agreement with another judge (``agreement_with``); none without one."""
    if not agreement:
        return []
    def shown(value, form):
        return "n/a" if value is None else format(value, form)

    other = agreement["with"]
    return [(f"agreement with {other}: the same verdict", f"{shown(agreement['agreement'], '.3f')} "
                                                        f"({agreement['pairs']} responses both read)"),
            (f"… Cohen's κ with {other}", shown(agreement["kappa"], "+.3f")),
            (f"… yes by both / this only / {other} only / neither", f"{agreement['both_same']} / "
             f"{agreement['only_this']} / {agreement['only_other']} / {agreement['neither']}"),
            (f"… judged share, this and {other} ({agreement['sets']} sets)",
             f"{shown(agreement['judged_share'], '.3f')} and {shown(agreement['other_judged_share'], '.3f')}"),
            (f"… Spearman ρ of the sets' shares with {other}", shown(agreement["spearman"], "+.3f"))]


def judge_words(summary: dict) -> str:
    """Who judged what, in one line."""
    return (f"judge {summary['judge']['model']}{' (both orders)' if summary['judge']['both_orders'] else ''}: "
            f"{summary['sets']} of {summary['sets_in_run']} sets, {summary['variants']} variant responses, "
            f"{summary['asked']} asked, {summary['unparsed']} unparsed"
            + ("; its system message read in the first user turn (its chat template refuses one)"
               if summary["judge"].get("system_folded") else ""))


def judge_line(summary: dict) -> str:
    """The judge's line under a run's result lines (``judge=``): its shares, then who judged what.

    >>> judge_line({"judged_share": 0.75, "judged_share_ci95": [0.5, 1.0], "identical_share": 0.5,
    ...             "judged_away": 0.25, "sets": 2, "sets_in_run": 2, "variants": 8, "asked": 4, "unparsed": 0,
    ...             "judge": {"model": "j", "both_orders": False}})
    'judged the same 0.750 (95% CI 0.500 to 1.000; identical 0.500, judged away 0.250) · judge j: 2 of 2 sets, 8 \
variant responses, 4 asked, 0 unparsed'
    """
    def share(key: str) -> str:  # None: no set had a verdict to read (every reply unparsed)
        return "—" if summary.get(key) is None else f"{summary[key]:.3f}"

    interval = summary.get("judged_share_ci95")  # None: one set; a summary from before the interval
    within = f"95% CI {interval[0]:.3f} to {interval[1]:.3f}; " if interval else ""
    return (f"judged the same {share('judged_share')} ({within}identical {share('identical_share')}, judged away "
            f"{share('judged_away')}) · {judge_words(summary)}")


def judge_table(summary: dict) -> str:
    """The summary as a short Markdown table, what ``posixlab judge`` prints."""
    return "\n".join([f"{judge_words(summary)} ({summary['run']})", "", "| metric | value |", "|---|---|",
                      *[f"| {label} | {value} |" for label, value in judge_rows(summary)],
                      *[f"\nwarning: {w}; its shares say more about the judge than the model"
                        for w in summary.get("warnings") or []]])
