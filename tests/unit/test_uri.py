import pytest

from cairn.core import uri as uris
from cairn.core.errors import InvalidURIError
from cairn.core.models import ContextType

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    "u, ctype",
    [
        ("cairn://resources/docs/guide.md", ContextType.RESOURCE),
        ("cairn://user/alice/memories/preferences", ContextType.MEMORY),
        ("cairn://agent/skills/pdf/extract-tables", ContextType.SKILL),
        ("cairn://user/alice/skills/mine", ContextType.SKILL),
        ("cairn://resources/docs/guide.md#3", ContextType.RESOURCE),
    ],
)
def test_context_type_comes_from_the_root(u, ctype):
    assert uris.context_type_of(u) is ctype


def test_tree_arithmetic():
    u = "cairn://resources/docs/api/auth.md"
    assert uris.parent(u) == "cairn://resources/docs/api"
    assert uris.ancestors(u) == ["cairn://resources", "cairn://resources/docs", "cairn://resources/docs/api"]
    assert uris.depth(u) == 4
    assert uris.parent("cairn://resources") is None


def test_a_chunk_belongs_to_its_files_directory():
    assert uris.parent("cairn://resources/docs/guide.md#2") == "cairn://resources/docs"
    assert uris.ancestors("cairn://resources/docs/guide.md#2")[-1] == "cairn://resources/docs"


def test_display_suffixes():
    assert uris.display_uri("cairn://resources/docs", 0) == "cairn://resources/docs/.abstract.md"
    assert uris.display_uri("cairn://resources/docs", 1) == "cairn://resources/docs/.overview.md"
    assert uris.display_uri("cairn://resources/docs/a.md", 2) == "cairn://resources/docs/a.md"


def test_owner_and_default_roots():
    assert uris.owner_of("cairn://user/bob/memories/x") == "bob"
    assert uris.owner_of("cairn://resources/x") is None
    assert uris.default_roots(ContextType.MEMORY, None) == []
    assert uris.default_roots(ContextType.SKILL, "bob") == ["cairn://agent/skills", "cairn://user/bob/skills"]


@pytest.mark.parametrize(
    "bad, says",
    [
        ("http://resources/x", "must start with 'cairn://'"),
        ("cairn://", "has no path"),
        ("cairn://resources/docs/", "must not end with '/'"),
        ("cairn://resources//docs", "empty path segment"),
        ("cairn://resources/../secrets", "'..' is not allowed"),
        ("cairn://files/x", "unknown root 'files'"),
        ("cairn://user/alice/notes", "only 'memories' and 'skills'"),
        ("cairn://agent/memories", "only 'skills' is allowed"),
        ("cairn://resources/a.md#x", "chunk fragment must be a non-negative number"),
        ("cairn://resources/a\tb", "control character"),
        ("cairn://resources" + "/a" * 32, "has 33 path segments; at most 32 are allowed"),
        ("cairn://resources/" + "x" * 256, "is 256 characters long; at most 255 are allowed"),
        ("cairn://resources/" + "/".join(["y" * 200] * 11), "is 2,228 characters long; at most 2,048 are allowed"),
        ("cairn://resources/a.md#1234567890", "at most 9 digits"),
    ],
)
def test_invalid_uris_say_which_rule_they_broke(bad, says):
    with pytest.raises(InvalidURIError) as err:
        uris.parse(bad)
    assert says in str(err.value)
    assert bad.split("//")[0] in str(err.value)


def test_namespace_uri_has_no_context_type():
    with pytest.raises(InvalidURIError, match="above every context root"):
        uris.context_type_of("cairn://user/alice")


def test_join_validates():
    assert uris.join("cairn://resources", "a", "b.md") == "cairn://resources/a/b.md"
    with pytest.raises(InvalidURIError):
        uris.join("cairn://resources", "..", "x")


def test_the_bounds_themselves_are_allowed():
    deepest = "cairn://resources" + "/a" * 31
    assert uris.depth(deepest) == 32
    assert uris.parse("cairn://resources/" + "x" * 255).segments[-1] == "x" * 255
    longest = "cairn://resources/" + "/".join(["y" * 200] * 10) + "/" + "z" * 20
    assert len(longest) == 2048 and uris.parse(longest + "#123456789").chunk == 123456789
