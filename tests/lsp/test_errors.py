"""The one map from the core's refusals and failures to what an editor is told of a refactor."""

from __future__ import annotations

from lsprotocol import types

from lsp_server.failures import EndpointFailure, FailureKind, RefusalCode, Refused, RouteFailed
from lsp_server.lsp.errors import refactor_message
from lsp_server.refactor.service import RefactorFailed


def failed(kind: FailureKind) -> RefactorFailed:
    cause = RouteFailed((EndpointFailure(endpoint="reasoner", kind=kind, message="said no"),))
    return RefactorFailed(f"refactor failed: {cause}", cause)


def test_an_endpoints_failure_is_an_error_with_what_to_do_when_its_kind_says() -> None:
    auth = refactor_message(failed(FailureKind.AUTH))
    assert auth.type is types.MessageType.Error
    assert auth.message.startswith("gateway-ls: refactor failed: reasoner: auth: said no")
    assert auth.message.endswith("(check the endpoint's API key)")
    assert "select less" in refactor_message(failed(FailureKind.CONTEXT_OVERFLOW)).message
    assert "try again" in refactor_message(failed(FailureKind.RATE_LIMITED)).message
    assert refactor_message(failed(FailureKind.SERVER)).message.endswith("said no")


def test_a_local_model_still_loading_is_news_and_other_refusals_are_errors() -> None:
    loading = Refused(RefusalCode.LOCAL_MODEL_LOADING, "the local model is loading")
    news = refactor_message(RefactorFailed(f"refactor failed: {loading}", loading))
    assert news.type is types.MessageType.Info
    assert news.message == "gateway-ls: refactor failed: the local model is loading"
    nothing = Refused(RefusalCode.NO_ENDPOINT_AVAILABLE, "the local model is disabled")
    assert refactor_message(RefactorFailed("refactor failed", nothing)).type is (
        types.MessageType.Error
    )


def test_a_refactor_the_core_declined_itself_is_said_as_it_was() -> None:
    message = refactor_message(RefactorFailed("select the code to refactor first"))
    assert message.type is types.MessageType.Error
    assert message.message == "gateway-ls: select the code to refactor first"
