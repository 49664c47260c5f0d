"""What a tool result looks like on the AG-UI side: TOOL_CALL_RESULT, or its CUSTOM fallback."""

from __future__ import annotations

import dataclasses
from typing import Any

from ag_ui.core import (
    AudioPart,
    ContentPart,
    DataSource,
    DocumentPart,
    FileSource,
    ImagePart,
    TextPart,
    UrlSource,
    VideoPart,
)
from pydantic_ai.messages import (
    AudioUrl,
    BinaryContent,
    DocumentUrl,
    FileUrl,
    ImageUrl,
    MultiModalContent,
    ToolReturnPart,
    UploadedFile,
    VideoUrl,
)

__all__ = ("payload_free", "tool_result_content")

_URL_PARTS: dict[type[FileUrl], type[ImagePart | AudioPart | VideoPart | DocumentPart]] = {
    ImageUrl: ImagePart,
    AudioUrl: AudioPart,
    VideoUrl: VideoPart,
    DocumentUrl: DocumentPart,
}
_MEDIA_PARTS: dict[str, type[ImagePart | AudioPart | VideoPart]] = {
    "image": ImagePart,
    "audio": AudioPart,
    "video": VideoPart,
}


def tool_result_content(part: ToolReturnPart) -> str | list[ContentPart]:
    """The readable execution value of a successful tool return.

    Text (or the JSON text of a structured value) for ordinary returns; a list of AG-UI content parts when
    the tool returned native media, so a browser can render it. Raw bytes never reach the wire as such.
    """
    files = part.files
    text = part.model_response_str(wrap_if_error=False)
    if not files:
        return text
    parts: list[ContentPart] = [TextPart(text=text)] if text else []
    parts.extend(_media_part(item) for item in files)
    return parts


def _media_part(item: MultiModalContent) -> ContentPart:
    if isinstance(item, FileUrl):
        return _URL_PARTS[type(item)](source=UrlSource(value=item.url, mime_type=item.media_type))
    kind = _MEDIA_PARTS.get(item.media_type.split("/", 1)[0], DocumentPart)
    if isinstance(item, UploadedFile):
        return kind(source=FileSource(value=item.file_id, provider=item.provider_name, mime_type=item.media_type))
    assert isinstance(item, BinaryContent)
    return kind(source=DataSource(value=item.base64, mime_type=item.media_type))


def payload_free(part: Any) -> Any:
    """A tool return or retry prompt without media payloads, for the CUSTOM fallback of unsuccessful results."""
    if isinstance(part, ToolReturnPart) and part.files:
        return dataclasses.replace(part, content=part.model_response_str(wrap_if_error=False))
    return part
