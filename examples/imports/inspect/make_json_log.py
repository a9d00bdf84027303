"""Writes the .json log (Inspect's single-file JSON format): `python make_json_log.py` with
inspect-ai installed (0.3.285); the log lands in json-logs/, renamed swe-tools.json."""

from inspect_ai import eval
from inspect_ai.model import ModelOutput, ModelUsage, get_model
from tool_task import swe_tools

outputs = []
for i in range(2):
    call = ModelOutput.for_tool_call(
        model="mockllm/model", tool_name="run", tool_arguments={"cmd": f"ls # sample {i}"}
    )
    call.usage = ModelUsage(input_tokens=800 + i, output_tokens=40, total_tokens=840 + i)
    done = ModelOutput.from_content(model="mockllm/model", content=f"Patched it (sample {i}).")
    done.usage = ModelUsage(input_tokens=900 + i, output_tokens=60, total_tokens=960 + i)
    outputs += [call, done]
model = get_model("mockllm/model", custom_outputs=outputs)
eval(
    swe_tools(),
    model=model,
    log_dir="json-logs",
    log_format="json",
    display="plain",
    max_samples=1,
)
