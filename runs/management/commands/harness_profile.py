"""Create or update an agent profile from the command line, validated by the admin's own form.

Only the options given change: `harness_profile support --instructions-file support.md` keeps the model and tools
of an existing `support` profile. A bad value changes nothing and exits non-zero with the form's messages.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.exceptions import NON_FIELD_ERRORS
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.forms import model_to_dict

from runs.forms import AgentProfileForm
from runs.models import AgentProfile
from runs.services.store import toolbox

FIELDS = AgentProfileForm.Meta.fields


class Command(BaseCommand):
    help = (
        "Create the agent profile NAME, or update the fields given of an existing one "
        "(e.g. harness_profile support --model openai:gpt-4o --tools lookup_record,search_records)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("name", help="the profile's name (letters, digits, - and _)")
        parser.add_argument("--model", help='"demo", or a pydantic-ai model string such as openai:gpt-4o')
        parser.add_argument("--base-url", help="an OpenAI-compatible server's address; empty for the provider's own")
        given = parser.add_mutually_exclusive_group()
        given.add_argument("--instructions", help="the agent's instructions")
        given.add_argument("--instructions-file", type=Path, metavar="PATH", help="read the instructions from PATH")
        parser.add_argument(
            "--tools", metavar="NAME,NAME", help="the host tools the agent may call, comma-separated; empty for none"
        )

    def handle(self, *args: Any, name: str, **options: Any) -> None:
        profile = AgentProfile.objects.filter(name=name).first()
        data = model_to_dict(profile, fields=FIELDS) if profile else {"name": name, "base_url": "", "instructions": ""}
        data.update(self._changes(options))
        form = AgentProfileForm(data, instance=profile)
        if not form.is_valid():
            raise CommandError(self._refusal(name, form))
        if profile is not None and not form.has_changed():
            self.stdout.write(f"Agent profile '{name}' is unchanged.")
            return
        saved = form.save()
        tools = ", ".join(saved.enabled_tools) or "no tools"
        verb = "Updated" if profile else "Created"
        self.stdout.write(f"{verb} agent profile '{saved.name}': model {saved.model}, {tools}.")

    def _changes(self, options: dict[str, Any]) -> dict[str, Any]:
        changes: dict[str, Any] = {}
        if options["model"] is not None:
            changes["model"] = options["model"]
        if options["base_url"] is not None:
            changes["base_url"] = options["base_url"]
        if options["instructions"] is not None:
            changes["instructions"] = options["instructions"]
        elif options["instructions_file"] is not None:
            try:
                changes["instructions"] = options["instructions_file"].read_text()
            except (OSError, UnicodeDecodeError) as exc:
                raise CommandError(f"Cannot read the instructions: {exc}") from exc
        if options["tools"] is not None:
            changes["enabled_tools"] = [tool.strip() for tool in options["tools"].split(",") if tool.strip()]
        return changes

    def _refusal(self, name: str, form: AgentProfileForm) -> str:
        lines = [f"Agent profile '{name}' was not saved:"]
        for field, errors in form.errors.items():
            label = "profile" if field == NON_FIELD_ERRORS else field
            lines += [f"  {label}: {error}" for error in errors]
        if "enabled_tools" in form.errors:
            lines.append(f"  Host tools: {', '.join(toolbox.tool_names()) or 'none'}.")
        return "\n".join(lines)
