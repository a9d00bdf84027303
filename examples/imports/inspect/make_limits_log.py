"""Writes the limits .eval log: `python make_limits_log.py` with inspect-ai installed."""

from inspect_ai import eval
from inspect_ai.model import ModelOutput, ModelUsage, get_model
from limits_task import swe_limits

outputs = []
for i in range(6):
    out = ModelOutput.from_content(model="mockllm/model", content=f"step {i}")
    out.usage = ModelUsage(input_tokens=100, output_tokens=10, total_tokens=110)
    outputs.append(out)
model = get_model("mockllm/model", custom_outputs=outputs)
eval(swe_limits(), model=model, log_dir="limits-logs", display="plain", fail_on_error=False)
