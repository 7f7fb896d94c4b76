"""The fixed sample conversations a changed chat template is rendered on, before and after.

Three conversations (a system prompt with history, one user turn, a finished tool-call round trip),
the tool they declare, and the fixed "now" that `strftime_now` returns while rendering, so a rendered
prompt depends on the revision only.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any


@dataclass(frozen=True)
class SampleConversation:
    """A fixed conversation rendered before and after a change, as `apply_chat_template` would."""

    id: str
    messages: tuple[dict[str, Any], ...]
    add_generation_prompt: bool
    tools: tuple[dict[str, Any], ...] | None = None


WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_current_weather",
        "description": "Get the current weather in a given city.",
        "parameters": {
            "type": "object",
            "properties": {
                "location": {"type": "string", "description": "The city and country, e.g. Paris, France"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"], "description": "The temperature unit"},
            },
            "required": ["location"],
        },
    },
}

SAMPLE_CONVERSATIONS = (
    SampleConversation(
        id="system_and_history",
        messages=(
            {"role": "system", "content": "You are a concise assistant. Answer in one sentence."},
            {"role": "user", "content": "What is the capital of France?"},
            {"role": "assistant", "content": "The capital of France is Paris."},
            {"role": "user", "content": "And roughly how many people live there?"},
        ),
        add_generation_prompt=True,
    ),
    SampleConversation(
        id="single_user_turn",
        messages=({"role": "user", "content": "Write a haiku about autumn leaves."},),
        add_generation_prompt=True,
    ),
    # A finished tool-use exchange as fine-tuning data holds it: no generation prompt. The call id has
    # the 9 alphanumeric characters Mistral's templates insist on; arguments are a mapping, as in
    # transformers' examples.
    SampleConversation(
        id="tool_call_round_trip",
        messages=(
            {"role": "user", "content": "What's the weather like in Paris right now?"},
            {
                "role": "assistant",
                "tool_calls": [
                    {
                        "id": "call12345",
                        "type": "function",
                        "function": {"name": "get_current_weather", "arguments": {"location": "Paris, France", "unit": "celsius"}},
                    }
                ],
            },
            {
                "role": "tool",
                "tool_call_id": "call12345",
                "name": "get_current_weather",
                "content": '{"temperature": 18, "unit": "celsius", "condition": "partly cloudy"}',
            },
            {"role": "assistant", "content": "It is 18 °C and partly cloudy in Paris."},
        ),
        tools=(WEATHER_TOOL,),
        add_generation_prompt=False,
    ),
)
# What `strftime_now` returns while rendering samples, so a prompt depends on the revision only.
SAMPLE_NOW = datetime(2025, 1, 15, 9, 30, tzinfo=UTC)
