"""Values the package hands back and takes (outcomes, results, limits,
contexts) pickle and copy to equal values."""

import copy
import pickle

import pytest

import sandwit


def round_trips(value):
    for protocol in range(pickle.HIGHEST_PROTOCOL + 1):
        back = pickle.loads(pickle.dumps(value, protocol=protocol))
        assert type(back) is type(value)
        assert back == value, (protocol, back, value)
        assert repr(back) == repr(value)
    assert copy.copy(value) == value and copy.deepcopy(value) == value


def test_contexts_and_limits_pickle_to_equal_values(host):
    for value in [
        sandwit.AgentCtx("chat-1"),
        sandwit.AgentCtx("chat-1", "user-7", channel_id="c", channel_name="#general",
                         channel_type="group", adapter_key="qq"),
        sandwit.RunLimits(),
        sandwit.RunLimits(timeout_s=2.5, memory_mib=64, fuel=123, max_calls=4,
                          max_output_bytes=5, max_events=6, max_event_bytes=7),
        host.limits,
        sandwit.CallLimits(),
        sandwit.CallLimits(timeout_s=0.25, memory_mib=3, fuel=9, table_elements=10,
                           max_core_instances=11, max_value_bytes=12, max_value_nodes=13,
                           max_value_depth=14, max_event_bytes=15),
        host.call_limits,
    ]:
        round_trips(value)
    assert pickle.loads(pickle.dumps(sandwit.AgentCtx("a"))) != sandwit.AgentCtx("b")


def test_run_limits_keep_the_fields_given_through_pickling(cache_dir):
    # A run's limits override only the fields they give: unpickled, they
    # still leave this run the host's 512 MiB, not the default 256.
    host = sandwit.Host(cache_dir=cache_dir, limits=sandwit.RunLimits(memory_mib=512),
                        prepared_interpreters=0)
    limits = pickle.loads(pickle.dumps(sandwit.RunLimits(timeout_s=20)))
    out = host.run("x = bytearray(300 << 20)\nprint(len(x) >> 20)", limits=limits)
    assert (out.status, out.stdout) == ("ok", "300\n"), out


def test_outcomes_and_results_pickle_to_equal_values(host, plugins, toolbox, ctx):
    calc = plugins["calc"]
    outcomes = [
        host.run("print(calculate_sum(1, 2))", ctx=ctx, plugins=toolbox),
        host.run("send_channel_message('hi')\n1 / 0", ctx=ctx, plugins=toolbox),
        host.run("search_knowledge_base('sandwit')", ctx=ctx, plugins=toolbox),
        host.run("generate_image_and_comment('a red fox')", ctx=ctx, plugins=toolbox),
        host.run("while True: pass", limits=sandwit.RunLimits(fuel=1_000_000)),
    ]
    assert [o.status for o in outcomes] == ["ok", "error", "agent_handoff", "agent_handoff",
                                            "limit_exceeded"]
    assert outcomes[1].events and "image" in [p.type for p in outcomes[3].handoff.result.parts]
    values = [*outcomes, outcomes[1].error, outcomes[2].handoff, outcomes[3].handoff.result,
              *outcomes[3].handoff.result.parts, outcomes[4].limit,
              calc.call("calculate_sum", {"num1": 1, "num2": 2}, ctx=ctx),
              sandwit.ContentPart("image_url", url="https://example.org/a.png")]
    for value in values:
        round_trips(value)
    back = pickle.loads(pickle.dumps(outcomes[1]))
    assert back.to_dict() == outcomes[1].to_dict()
    # Different values are not equal.
    assert outcomes[0] != outcomes[1] and outcomes[0] != "ok"


def test_unpickling_refuses_what_sandwit_did_not_pickle():
    with pytest.raises(ValueError, match="no class 'Host'"):
        sandwit._sandwit._restore("Host", ())
