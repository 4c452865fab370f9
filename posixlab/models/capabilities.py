"""What a model can do. A task says which of these it needs (``posixlab/tasks/``); a backend declares which it has,
once, where it registers (``posixlab/backends.py``); the run checks the two agree before any work. Code that
depends on what a model can do asks for a capability, never for a backend's name. One thing varies by model, not
by backend: whether its tokenizer has a chat template (``check_chat_template``)."""

from posixlab.errors import ConfigError

GENERATE = "generate"  # greedy text for a prompt: every model
SCORE = "score"  # log P(continuation | prompt) on token ids: in-process transformers, vLLM
# a JSON object of a given schema: a chat API through instructor; in process and on vLLM, greedy decoding held to the
# schema shown in the prompt (llguidance grammars, vLLM's structured_outputs)
STRUCTURED = "structured"
# instructor's request modes besides the schema in the prompt (tools, response_format): a chat API's
TOOLS = "tools"
# token-level log-probabilities of spans inside one full sequence, in this process (``score_full``): each class's
# probability in the label slot of a JSON answer (strategy=structured with probability=label_probs)
SLOT_SCORES = "slot_scores"
# greedy at temperature 0 gives the same answer to the same prompt, every time (in process, vLLM): the noise floor of
# such a model measures nothing but the stack
DETERMINISTIC = "deterministic"


def check_chat_template(tokenizer, name: str) -> None:
    """A ``ConfigError`` unless the tokenizer has a chat template (``chat_template=true`` wraps prompts in it)."""
    if not getattr(tokenizer, "chat_template", None):
        raise ConfigError(f"model {name} has no chat template (a base model, say); run with chat_template=false, "
                          f"or choose an instruction-tuned model")
