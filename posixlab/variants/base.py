"""The shared record types of prompt variation, and the interface every variant type implements.

A variant is a deterministic function of (seed, item id, variant index): ``rng_for`` (``posixlab.seeding``) derives
a private random stream from those three, so adding sets, reordering them or running them in parallel never changes a
variant.
Every variant carries a JSON-serialisable ``record`` of what was done to the original.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from posixlab.errors import ConfigError, is_whole
from posixlab.prompts import PromptItem, Shot, chat_messages, join_turns, render_turns
from posixlab.seeding import rng_for  # noqa: F401  (re-exported: its home before posixlab.seeding)


@dataclass(frozen=True)
class Edit:
    """What a variant changes in a prompt: the question text, the template, or both; and a record of how."""

    question: str | None = None  # None: the item's own question
    template: str | None = None  # None: the original format
    record: dict = field(default_factory=dict)


@dataclass(frozen=True)
class PromptVariant:
    """One prompt of an intent-aligned set: its text, how it was made from the original, and its chat turns."""

    text: str
    kind: str  # "original", "spelling", "template", "paraphrase"
    index: int  # position among the variants of its kind; -1 for the original
    record: dict = field(default_factory=dict)
    turns: tuple = ()  # (user text, gold answer | None) per exemplar and for the question: for chat templates

    def messages(self) -> list[dict]:
        return chat_messages(list(self.turns)) if self.turns else [{"role": "user", "content": self.text}]

    def to_dict(self) -> dict:
        d = asdict(self)
        d.pop("turns")  # the text holds the same content; the chat form is recorded as the model's text
        return d


@dataclass(frozen=True)
class PromptSet:
    """An intent-aligned prompt set: the item it came from, its exemplars, and its prompts (the original first when
    included)."""

    item: PromptItem
    variant_type: str
    prompts: tuple[PromptVariant, ...]
    shots: tuple[PromptItem, ...] = ()

    @property
    def set_id(self) -> str:
        return f"{self.item.item_id}/{self.variant_type}"

    def texts(self) -> list[str]:
        return [p.text for p in self.prompts]


def make_prompt(item: PromptItem, edit: Edit, kind: str, index: int, shots=(), shot_edits=None) -> PromptVariant:
    """Render ``item`` under ``edit``, after its exemplars (rewritten by ``shot_edits`` when exemplars are perturbed).

    Exemplars always take the question's template, so a template variant reformats them as well.
    """
    shot_edits = shot_edits or [None] * len(shots)
    rendered = tuple(Shot(ex, e.question if e else None) for ex, e in zip(shots, shot_edits))
    turns = render_turns(item, template=edit.template, question=edit.question, shots=rendered)
    record = dict(edit.record)
    if any(shot_edits):
        record["exemplar_edits"] = [e.record if e else None for e in shot_edits]
    return PromptVariant(text=join_turns(turns), kind=kind, index=index, record=record, turns=tuple(turns) if shots else ())


class VariantGenerator:
    """Makes the variants of one kind. Subclasses set ``kind`` and implement ``edit``.

    ``build_set`` gives the paper's set: the original prompt followed by ``num_variants`` variants. A variant type
    that composes its set differently (the mixture) overrides ``build_set``. ``prepare`` runs once before any set is
    built, with every item that will be rendered (exemplars included): the paraphrase type fetches its paraphrases
    there.
    """

    kind: str = ""
    max_variants: int | None = None  # None: unbounded
    uses_paraphrases = False  # True: the constructor takes a ParaphraseSource (``source=``)

    def edit(self, item: PromptItem, index: int, seed: int) -> Edit:
        raise NotImplementedError

    def prepare(self, items: list[PromptItem], num_variants: int, progress: bool = True) -> None:
        pass

    def describe(self) -> dict:
        """What the results should record about this generator (the paraphrase type names its rephraser)."""
        return {}

    def release(self) -> None:
        """Once every set is built: close what ``prepare`` opened (a rephraser's model), before the run's loads."""

    def checked_edit(self, item: PromptItem, index: int, seed: int) -> Edit:
        """``edit``'s result, with a variant type's mistakes said where they are: a value that is no ``Edit`` is a
        ``ConfigError`` naming the type and its class; an exception in ``edit`` keeps its traceback, with a note of
        the item and variant it was making (a plug-in's author reads both)."""
        try:
            edit = self.edit(item, index, seed)
        except Exception as exc:
            exc.add_note(f"(in variant={self.kind}'s edit, {type(self).__module__}.{type(self).__qualname__}, making "
                         f"variant {index} of item {item.item_id!r})")
            raise
        if not (isinstance(edit, Edit) and isinstance(edit.record, dict)
                and all(v is None or isinstance(v, str) for v in (edit.question, edit.template))):
            raise ConfigError(f"variant={self.kind} ({type(self).__module__}.{type(self).__qualname__}.edit) returned "
                              f"{_kind_of(edit)} for item {item.item_id!r}: return posixlab.variants.Edit(question="
                              f"TEXT or None, template=TEXT or None, record=DICT of what was done)")
        return edit

    def variant(self, item: PromptItem, index: int, seed: int, shots=(), perturb_shots: bool = False) -> PromptVariant:
        shot_edits = [self.checked_edit(ex, index, seed) for ex in shots] if perturb_shots else None
        return make_prompt(item, self.checked_edit(item, index, seed), self.kind, index, shots, shot_edits)

    def original(self, item: PromptItem, shots=()) -> PromptVariant:
        return make_prompt(item, Edit(), "original", -1, shots)

    def check_size(self, num_variants: int) -> None:
        if not is_whole(num_variants, 1):
            raise ConfigError(f"num_variants must be a whole number of at least 1 (a set needs 2 prompts), got "
                              f"{num_variants!r}")
        if self.max_variants is not None and num_variants > self.max_variants:
            raise ConfigError(
                f"variant={self.kind} has {self.max_variants} distinct variants, but num_variants={num_variants}"
            )

    def build_set(self, item: PromptItem, num_variants: int, seed: int, shots=(), perturb_shots: bool = False) -> PromptSet:
        self.check_size(num_variants)
        prompts = [self.original(item, shots)] + [self.variant(item, v, seed, shots, perturb_shots)
                                                  for v in range(num_variants)]
        return PromptSet(item=item, variant_type=self.kind, prompts=tuple(prompts), shots=tuple(shots))


def _kind_of(value) -> str:
    """How an error names a value that is no ``Edit``: its type, or which of an Edit's fields is of the wrong kind.

    >>> _kind_of("a question"), _kind_of(Edit(question=["a"]))
    ("str ('a question')", 'an Edit whose question is a list')
    """
    if isinstance(value, Edit):
        wrong = next(f for f in ("question", "template", "record") if not isinstance(
            getattr(value, f), dict if f == "record" else (str, type(None))))
        return f"an Edit whose {wrong} is a {type(getattr(value, wrong)).__name__}"
    return f"{type(value).__name__} ({str(value)[:40]!r})"
