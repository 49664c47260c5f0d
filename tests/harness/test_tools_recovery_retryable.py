"""`recovery_retryable` and `RECOVERY_RETRY_SAFE_METADATA_KEY` (S51–S56, T46)."""

from __future__ import annotations

from pydantic_ai import RunContext, Tool, ToolDefinition

from runs.harness import RECOVERY_RETRY_SAFE_METADATA_KEY, is_recovery_retryable, recovery_retryable, tools


def read_record(record_id: str) -> str:
    return f"record {record_id}"


def test_the_key_is_the_documented_string():
    assert RECOVERY_RETRY_SAFE_METADATA_KEY == "a13n.harness.recovery_retry_safe"


def test_decorator_returns_a_native_tool_calling_the_function_directly():
    @recovery_retryable
    def lookup_record(record_id: str) -> str:
        """Look a record up."""
        return read_record(record_id)

    assert isinstance(lookup_record, Tool)
    assert lookup_record.name == "lookup_record"
    assert lookup_record.metadata == {RECOVERY_RETRY_SAFE_METADATA_KEY: True}
    assert lookup_record.tool_def.metadata == {RECOVERY_RETRY_SAFE_METADATA_KEY: True}
    assert lookup_record.function.__name__ == "lookup_record"
    assert lookup_record.function("r1") == "record r1"


def test_wrapping_an_existing_tool_copies_it_and_leaves_the_original_untouched():
    original = Tool(
        read_record,
        name="search",
        description="Search records.",
        requires_approval=True,
        max_retries=4,
        metadata={"owner": "catalog"},
    )

    declared = recovery_retryable(original)

    assert declared is not original
    assert original.metadata == {"owner": "catalog"}
    assert RECOVERY_RETRY_SAFE_METADATA_KEY not in original.tool_def.metadata
    assert declared.metadata == {"owner": "catalog", RECOVERY_RETRY_SAFE_METADATA_KEY: True}
    assert declared.function is read_record
    assert (declared.name, declared.description, declared.requires_approval, declared.max_retries) == (
        "search",
        "Search records.",
        True,
        4,
    )
    assert declared.tool_def.kind == "unapproved"


def test_bound_methods_and_context_tools_keep_their_signature():
    class Catalog:
        def lookup_record(self, record_id: str) -> str:
            return read_record(record_id)

    def with_context(ctx: RunContext[None], record_id: str) -> str:
        return read_record(record_id)

    method_tool = recovery_retryable(Catalog().lookup_record)
    context_tool = recovery_retryable(with_context)

    assert method_tool.name == "lookup_record" and not method_tool.takes_ctx
    assert context_tool.takes_ctx
    assert is_recovery_retryable(method_tool.tool_def) and is_recovery_retryable(context_tool.tool_def)


# The seed page's sample as it is written there, for its own package; here only the package name changes.
SEED_SAMPLE = """
from a13n_harness.tools import RECOVERY_RETRY_SAFE_METADATA_KEY, recovery_retryable
from pydantic_ai import Tool
from pydantic_ai.capabilities import Capability, SetToolMetadata

@recovery_retryable
def lookup_record(record_id: str) -> str:
    return read_record(record_id)

catalog = Capability(
    id="acme.catalog",
    tools=[lookup_record, recovery_retryable(Tool(search_records, name="search"))],
)
declared = SetToolMetadata(tools=["search"], **{RECOVERY_RETRY_SAFE_METADATA_KEY: True})
"""


def test_the_seed_sample_runs_with_only_the_package_name_changed():
    namespace: dict = {"read_record": read_record, "search_records": lambda query: [query]}
    exec(SEED_SAMPLE.replace("a13n_harness.", "runs.harness."), namespace)

    assert namespace["catalog"].id == "acme.catalog"
    assert is_recovery_retryable(namespace["lookup_record"].tool_def)
    assert namespace["lookup_record"].function("r1") == "record r1"


def test_the_tools_module_re_exports_the_engine_names():
    assert tools.__all__ == ("RECOVERY_RETRY_SAFE_METADATA_KEY", "recovery_retryable")
    assert tools.recovery_retryable is recovery_retryable
    assert tools.RECOVERY_RETRY_SAFE_METADATA_KEY is RECOVERY_RETRY_SAFE_METADATA_KEY


def test_only_boolean_true_declares_a_tool():
    def definition(metadata: dict | None) -> ToolDefinition:
        return ToolDefinition(name="t", metadata=metadata)

    assert is_recovery_retryable(definition({RECOVERY_RETRY_SAFE_METADATA_KEY: True}))
    for value in (False, 1, "true", "True", None, [True]):
        assert not is_recovery_retryable(definition({RECOVERY_RETRY_SAFE_METADATA_KEY: value}))
    assert not is_recovery_retryable(definition(None))
    assert not is_recovery_retryable(definition({"other": True}))
    # S56: an idempotency key or read-only hint is not a declaration; only the explicit key is.
    assert not is_recovery_retryable(definition({"idempotency": "provider_key", "read_only": True}))
