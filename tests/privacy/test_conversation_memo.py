"""A conversation judged turn by turn finds what a scan of all of it finds, and no client's
remembered verdicts answer another's."""

from __future__ import annotations

import random

import pytest

from bench.credential_corpus import load_corpus
from lsp_server.privacy import conversation_memo
from lsp_server.privacy.conversation_memo import ConversationMemo
from lsp_server.privacy.secret_rules import first_secret

pytestmark = pytest.mark.unit

SECRETS = [sample for sample in load_corpus() if sample.kind is not None]
INSTRUCTIONS = "You are a coding agent. Keep changes small and run the tests.\n" * 300
TOOL_OUTPUT = "def handler(event):\n    return {'status': 200, 'body': event['body']}\n" * 20


def whole_scan_kind(texts: list[str]) -> str | None:
    """What judging the whole conversation each turn finds: the texts apart and run together."""
    finding = first_secret("\n".join(texts)) or first_secret("".join(texts))
    return finding.kind if finding is not None else None


def test_a_secret_added_in_a_later_turn_is_caught() -> None:
    memo = ConversationMemo()
    turn = [INSTRUCTIONS, "What does handler do?", TOOL_OUTPUT]
    assert memo.first_secret_kind("alice", turn) is None
    for sample in SECRETS:
        later = [*turn, "Here is the config it reads:", sample.text]
        assert memo.first_secret_kind("alice", later) is not None, sample.text
    assert memo.first_secret_kind("alice", [*turn, "Thanks, that helps."]) is None


def test_a_changed_earlier_message_is_judged_again() -> None:
    memo = ConversationMemo()
    first = [INSTRUCTIONS, "What does handler do?", TOOL_OUTPUT, "It returns the body."]
    assert memo.first_secret_kind("alice", first) is None
    for sample in SECRETS:
        # An agent that rewrites its history (compaction, an edited tool result): the earlier
        # message now holds a secret, the later ones are as before.
        changed = [INSTRUCTIONS, "What does handler do?", TOOL_OUTPUT + sample.text, first[3]]
        assert memo.first_secret_kind("alice", changed) is not None, sample.text
        assert memo.first_secret_kind("alice", [*changed, "And now?"]) is not None


def test_a_secret_split_across_the_old_and_the_new_turn_is_one() -> None:
    memo = ConversationMemo()
    split = 0
    for sample in SECRETS:
        half = len(sample.text) // 2
        old = [INSTRUCTIONS, "Paste the line:\n", sample.text[:half]]
        new = [*old, sample.text[half:]]
        if whole_scan_kind(old) is not None or whole_scan_kind(new) is None:
            continue  # the half holds one already, or the pieces make none
        split += 1
        assert memo.first_secret_kind("alice", old) is None
        assert memo.first_secret_kind("alice", new) is not None, sample.text
    assert split > len(SECRETS) // 2


def test_a_name_in_one_turn_and_its_value_in_the_next() -> None:
    memo = ConversationMemo()
    old = [INSTRUCTIONS, "env:\n- name: DB_PASSWORD"]
    assert memo.first_secret_kind("alice", old) is None
    new = [*old, "  value: Tr0ub4dor-and-3-more"]
    assert whole_scan_kind(new) is not None
    assert memo.first_secret_kind("alice", new) is not None


def test_a_block_named_in_one_turn_and_its_value_in_the_next() -> None:
    memo = ConversationMemo()
    header = 'variable "db_password" {\n  description = "main"\n  type = string\n  sensitive = true'
    old = [INSTRUCTIONS, header]
    assert memo.first_secret_kind("alice", old) is None
    new = [*old, '  default = "Tr0ub4dor-and-3-more"\n}']
    assert whole_scan_kind(new) == "block-secret"
    assert memo.first_secret_kind("alice", new) == "block-secret"


def test_a_private_key_begun_long_before_is_found() -> None:
    key = next(sample.text for sample in SECRETS if sample.kind == "private-key")
    lines = key.splitlines()
    memo = ConversationMemo()
    old = [INSTRUCTIONS, "\n".join(lines[:1]), TOOL_OUTPUT]
    memo.first_secret_kind("alice", old)
    new = [*old, "\n".join(lines[1:])]
    assert memo.first_secret_kind("alice", new) == whole_scan_kind(new)


def test_a_private_key_whose_marker_two_texts_split_is_found() -> None:
    # The key's header, cut in two by the texts, then more armour lines than a turn is read
    # back; its body comes a turn later. Only the texts run together hold the whole header.
    key = next(sample.text for sample in SECRETS if sample.kind == "private-key")
    header_end = key.index("-----\n", key.index("PRIVATE KEY")) + len("-----\n")
    cut = key.index("PRIVATE KEY") + len("PRIV")
    armour = "Comment: exported by the build\n" * 10
    memo = ConversationMemo()
    old = [INSTRUCTIONS, TOOL_OUTPUT + key[:cut], key[cut:header_end] + armour]
    assert memo.first_secret_kind("alice", old) is None
    new = [*old, key[header_end:]]
    assert first_secret("\n".join(new)) is None
    assert memo.first_secret_kind("alice", new) == whole_scan_kind(new) == "private-key"


@pytest.mark.parametrize("seed", range(8))
def test_turn_by_turn_agrees_with_a_whole_scan(seed: int) -> None:
    """Conversations growing by random turns (ordinary text, tool output, secrets, pieces of
    secrets): each turn's verdict is the whole scan's."""
    rng = random.Random(seed)
    memo = ConversationMemo()
    pieces = [
        "Run the tests.",
        TOOL_OUTPUT,
        "password:",
        "export API_TOKEN=",
        "\n",
        *(sample.text for sample in rng.sample(SECRETS, 6)),
        *(sample.text[: len(sample.text) // 2] for sample in rng.sample(SECRETS, 6)),
        *(sample.text[len(sample.text) // 2 :] for sample in rng.sample(SECRETS, 6)),
    ]
    for _ in range(20):
        texts = [INSTRUCTIONS]
        for _ in range(rng.randint(1, 8)):
            texts.append(rng.choice(pieces))
            expected = whole_scan_kind(texts) is not None
            assert (memo.first_secret_kind("alice", texts) is not None) == expected, texts[1:]


def test_one_clients_verdicts_never_answer_anothers(monkeypatch: pytest.MonkeyPatch) -> None:
    scans: list[str] = []
    real = first_secret  # what conversation_memo calls until it is patched below

    def counting(text: str, start: int = 0) -> object:
        scans.append(text)
        return real(text, start)

    monkeypatch.setattr(conversation_memo, "first_secret", counting)
    memo = ConversationMemo()
    conversation = [INSTRUCTIONS, "What does handler do?", TOOL_OUTPUT]
    assert memo.first_secret_kind("alice", conversation) is None
    judged = len(scans)
    assert judged > 0
    assert memo.first_secret_kind("alice", conversation) is None
    assert len(scans) == judged  # remembered for alice
    assert memo.first_secret_kind("bob", conversation) is None
    assert len(scans) > judged  # bob's is judged on its own


def test_memory_is_bounded() -> None:
    memo = ConversationMemo(clients=3, conversations=5)
    for client in range(10):
        for turn in range(20):
            memo.first_secret_kind(f"client-{client}", [INSTRUCTIONS, f"turn {turn}"])
    assert memo.remembered() <= 3 * 5
    assert len(memo._last) <= 3  # the last conversation kept to compare with, per client
    memo.first_secret_kind("client-9", [INSTRUCTIONS * 100])
    assert "client-9" not in memo._last  # too long to keep
