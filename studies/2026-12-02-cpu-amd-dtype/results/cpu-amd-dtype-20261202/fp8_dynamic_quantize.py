from transformers import AutoModelForCausalLM, AutoTokenizer
from llmcompressor import oneshot
from llmcompressor.modifiers.quantization import QuantizationModifier
m="/work/main/models/smollm2-135m-instruct"
model=AutoModelForCausalLM.from_pretrained(m, dtype="auto"); tok=AutoTokenizer.from_pretrained(m)
oneshot(model=model, recipe=QuantizationModifier(targets="Linear", scheme="FP8_DYNAMIC", ignore=["lm_head"]))
model.save_pretrained("/tmp/fp8dyn", save_compressed=True); tok.save_pretrained("/tmp/fp8dyn")
