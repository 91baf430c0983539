"""The Chat Completions model codeloop talks to a llama.cpp server with (`agents.models.local`
starts the server): pydantic-ai's OpenAI chat model, with the two things llama-cpp-python's server
needs said differently. A module of its own because it imports the OpenAI SDK, which only a
process that runs a local model should pay for."""

from collections.abc import Sequence

from openai.types.chat import ChatCompletionMessageParam
from pydantic_ai.messages import ModelMessage
from pydantic_ai.models import ModelRequestParameters
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.profiles.openai import OpenAIModelProfile
from pydantic_ai.providers.openai import OpenAIProvider
from pydantic_ai.settings import ModelSettings


def local_profile() -> OpenAIModelProfile:
    """What llama-cpp-python's tool-calling chat handler accepts: `tool_choice` only `auto` (it
    asserts so: `required` would be a server error), no strict schemas."""
    return OpenAIModelProfile(
        supports_forced_tool_choice=False,
        openai_supports_strict_tool_definition=False,
    )


class LlamaCppChatModel(OpenAIChatModel):
    """Chat Completions as llama-cpp-python's server accepts them: an assistant message that only
    calls tools carries `content: ""`, not null. Its request schema wants a string there and
    refuses the whole request otherwise (an HTTP 500, seen with SmolLM2's first tool call)."""

    async def _map_messages(
        self,
        messages: Sequence[ModelMessage],
        model_request_parameters: ModelRequestParameters,
        *,
        model_settings: ModelSettings | None = None,
    ) -> list[ChatCompletionMessageParam]:
        mapped = await super()._map_messages(
            messages, model_request_parameters, model_settings=model_settings
        )
        for message in mapped:
            if message.get("role") == "assistant" and message.get("content") is None:
                message["content"] = ""
        return mapped


def llama_chat_model(model_name: str, base_url: str, *, api_key: str) -> LlamaCppChatModel:
    """The model for the server at `base_url` (`…/v1`)."""
    return LlamaCppChatModel(
        model_name, provider=OpenAIProvider(base_url=base_url, api_key=api_key), profile=local_profile()
    )
