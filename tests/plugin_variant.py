"""A variant type that lives outside the package, as a contributor's would: one module with a ``VariantGenerator``
subclass that registers itself when imported (``posixlab.variants.register_variant``), with no edit to posixlab.

**Casing**: variant ``v`` of a question writes ``1 + v % most`` of its words in capitals (``most``: the type's one
option, 3 unless ``variant.options.most=`` says otherwise), the words chosen by a random
stream private to (seed, item, index) (``posixlab.seeding.rng_for``), so a variant is the same in any run, order or
shard; its record says which words. A harmless change in HELM's sense (its ``UpperCasePerturbation`` does it to the
whole text). tests/test_plugins.py runs it from Python and from the command line, alone and in a sweep.
"""

from __future__ import annotations

from posixlab.seeding import rng_for
from posixlab.variants import Edit, VariantGenerator, register_variant

KIND = "casing"


@register_variant
class CasingVariants(VariantGenerator):
    kind = KIND

    def __init__(self, most: int = 3):
        self.most = most

    def edit(self, item, index: int, seed: int) -> Edit:
        words = item.question.split(" ")
        candidates = [i for i, word in enumerate(words) if any(c.islower() for c in word)]
        rng = rng_for(seed, item.item_id, KIND, index)
        chosen = sorted(rng.sample(candidates, min(len(candidates), 1 + index % self.most)))
        for i in chosen:
            words[i] = words[i].upper()
        return Edit(question=" ".join(words), record={"upper_cased": [words[i] for i in chosen]})
