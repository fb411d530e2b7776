"""movers.tokens.using: a block's tokens by server, and a block without any hiding the
tokens set around it (a copy with no token must not send its caller's)."""
from gridxfer.movers.base import TokenPair
from gridxfer.movers.tokens import token_for, using

A, B = "root://a.example:1094//d/f", "davs://b.example:443/d/f"


def test_a_block_gives_each_side_its_token_and_restores_the_outer_ones():
    assert token_for(A) is None
    with using(TokenPair(src="tok-a", dst="tok-b"), A, B) as by_host:
        assert by_host == {"a.example:1094": "tok-a", "b.example:443": "tok-b"}
        assert token_for(A) == "tok-a" and token_for(B) == "tok-b"
        with using(TokenPair(src=None, dst="tok-c"), A, B):
            assert token_for(A) is None and token_for(B) == "tok-c"
        assert token_for(A) == "tok-a"
    assert token_for(A) is None and token_for(B) is None


def test_a_block_without_tokens_hides_the_outer_ones():
    with using(TokenPair(src="tok-a"), A, ""):
        with using(None, A, B) as by_host:
            assert by_host == {} and token_for(A) is None
        assert token_for(A) == "tok-a"
    with using(None, A, B) as by_host:          # nothing around it: nothing to hide
        assert by_host == {} and token_for(A) is None


def test_bearer_without_tokens_also_hides_the_outer_ones():
    """authz.bearer's plain block (no token anywhere) must not be taken when a caller's
    tokens are set: the copy inside would send them."""
    from gridxfer.movers.xrootd.authz import bearer, xurl
    with using(TokenPair(src="tok-a"), A, ""):
        with bearer(None, A, B):
            assert token_for(A) is None and xurl(A) == A
        assert token_for(A) == "tok-a"
    with bearer(None, A, B):
        assert token_for(A) is None and xurl(A) == A
