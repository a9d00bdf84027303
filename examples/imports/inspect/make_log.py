"""Writes the .eval log beside it: `python make_log.py` with inspect-ai installed (0.3.285)."""

from inspect_ai import eval
from inspect_ai.model import ModelOutput, ModelUsage, get_model
from swe_task import swe_mini

outputs = []
for i in range(3):
    out = ModelOutput.from_content(
        model="mockllm/model",
        content=f"THOUGHT: inspect the code, then patch it (sample {i}).\n\n```bash\nls\n```",
    )
    out.usage = ModelUsage(input_tokens=1200 + i, output_tokens=300 + i, total_tokens=1500 + 2 * i)
    outputs.append(out)
model = get_model("mockllm/model", custom_outputs=outputs)
eval(swe_mini(), model=model, log_dir="logs", display="plain", max_samples=1)
