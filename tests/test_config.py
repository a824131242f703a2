"""Configs, profiles and notebook parameter checks (reconstruction §5, §7)."""
import pytest

from dlgn_lib import config as C


def small_config(**changes):
    cfg = C.RunConfig(C.DataSpec.make("circle", target="steps", n_train=64),
                      C.ModelSpec.make("dlgn", (4, 4)), epochs=10)
    return cfg.replace(**changes)


def test_key_is_stable_and_covers_every_field_but_the_name():
    a = small_config()
    assert a.key() == small_config().key()
    assert a.key() == a.replace(name="a label").key()
    for change in [dict(seed=1), dict(epochs=11), dict(lr=0.02), dict(batch_size=8),
                   dict(model=C.ModelSpec.make("dlgn", (4, 4), beta=3.0)),
                   dict(data=C.DataSpec.make("circle", target="steps", n_train=65))]:
        assert a.replace(**change).key() != a.key(), change


def test_key_does_not_depend_on_keyword_order():
    m1 = C.ModelSpec.make("dlgn", (3,), beta=2.0, gate_bias=True)
    m2 = C.ModelSpec.make("dlgn", (3,), gate_bias=True, beta=2.0)
    assert m1 == m2


def test_json_round_trip():
    cfg = small_config(name="x", batch_size=16)
    back = C.RunConfig.from_json(cfg.to_json())
    assert back == cfg and back.key() == cfg.key() and back.name == "x"


@pytest.mark.parametrize("epochs,n", [(100, 25), (2000, 12), (10, 25), (5, 2), (3000, 40)])
def test_snapshot_epochs_are_log_spaced_and_exact_in_count(epochs, n):
    e = C.snapshot_epochs(epochs, n)
    assert e[0] == 0 and e[-1] == epochs
    assert len(e) == min(n, epochs + 1) and e == sorted(set(e))
    if n < epochs + 1 and n > 4:
        gaps = [b - a for a, b in zip(e, e[1:])]
        assert gaps[0] <= gaps[-1]  # dense early, sparse late


@pytest.mark.parametrize("params,name,allowed", [
    (dict(PROFILE="bogus"), "PROFILE", "'quick', 'full'"),
    (dict(PROFILE=3), "PROFILE", "'quick', 'full'"),
    (dict(SEED=-1), "SEED", ">= 0"),
    (dict(SEED="1"), "SEED", "integer"),
    (dict(SEED=True), "SEED", "integer"),
    (dict(EPOCHS=0), "EPOCHS", ">= 1"),
    (dict(SEEDS=2.5), "SEEDS", "integer"),
    (dict(PROFLIE="quick"), "PROFLIE", "known: PROFILE"),
])
def test_bad_parameters_name_the_parameter_and_the_allowed_values(params, name, allowed):
    with pytest.raises(C.ParameterError) as info:
        C.check_parameters(**params)
    assert name in str(info.value) and allowed in str(info.value)


def test_good_parameters_pass():
    C.check_parameters(PROFILE="full", SEED=0, EPOCHS=None, SEEDS=3)


def test_profiles_differ_only_in_sizes():
    for nb, profiles in C.NOTEBOOK_SIZES.items():
        assert set(profiles) == set(C.PROFILES), nb
        assert set(profiles["quick"]) == set(profiles["full"]), nb
        for key, value in profiles["quick"].items():
            other = profiles["full"][key]
            if value is not None and other is not None:  # None means "all" / "full batch"
                assert type(value) is type(other), (nb, key)


def test_for_notebook_sizes_overrides_and_errors():
    cfg = C.for_notebook("01", "quick", seed=3, epochs=7, widths=None)
    assert cfg.epochs == 7 and cfg.seed == 3
    assert cfg.widths == C.NOTEBOOK_SIZES["01"]["quick"]["widths"]
    run = cfg.run(C.DataSpec.make("circle"), C.ModelSpec.make("dlgn", cfg.widths))
    assert run.epochs == 7 and run.seed == 3
    assert cfg.run(C.DataSpec.make("circle"), C.ModelSpec.make("dlgn", cfg.widths), seed=5).seed == 5
    with pytest.raises(C.ParameterError, match="PROFILE"):
        C.for_notebook("01", "bogus")
    with pytest.raises(C.ParameterError, match="no_such_size"):
        C.for_notebook("01", "quick", no_such_size=1)
    with pytest.raises(AttributeError, match="known"):
        cfg.no_such_size


@pytest.mark.parametrize("changes,name", [(dict(epochs=0), "epochs"), (dict(seed=-2), "seed"),
                                          (dict(optimizer="lbfgs"), "optimizer"), (dict(lr=0), "lr"),
                                          (dict(batch_size=0), "batch_size")])
def test_bad_run_config_fields_are_rejected(changes, name):
    with pytest.raises(C.ParameterError, match=name):
        small_config(**changes)


def test_target_seed_is_a_known_parameter_and_checked():
    C.check_parameters(TARGET_SEED=100)
    with pytest.raises(C.ParameterError, match="TARGET_SEED"):
        C.check_parameters(TARGET_SEED=-1)
    with pytest.raises(C.ParameterError, match="TARGET_SEED"):
        C.check_parameters(TARGET_SEED="1")


def kernel_namespace(**params):
    """What a notebook's globals hold when its setup cell runs: IPython's names, a module, parameters."""
    import types
    return {"__name__": "__main__", "_i1": "", "In": [], "Out": {}, "get_ipython": print, "exit": None,
            "quit": None, "dl": types.ModuleType("dlgn_lib"), **params}


def test_setup_returns_the_sizes_with_parameter_overrides(capsys):
    cfg = C.setup("05", kernel_namespace(PROFILE="quick", SEED=7, TARGET_SEED=3, EPOCHS=5, SEEDS=2))
    assert (cfg.epochs, cfg.n_seeds, cfg.seeds, cfg.target_seed) == (5, 2, [7, 8], 3)
    assert capsys.readouterr().out.strip() == cfg.describe()
    plain = C.setup("05", kernel_namespace(PROFILE="quick", SEED=7, TARGET_SEED=3, EPOCHS=None, SEEDS=None),
                    show=False)
    assert dict(plain.sizes) == dict(C.NOTEBOOK_SIZES["05"]["quick"])
    both = C.setup("08", kernel_namespace(PROFILE="full", SEED=0, TARGET_SEED=0, SEEDS=4), show=False)
    assert (both.n_seeds, both.odt_seeds) == (4, 4)


@pytest.mark.parametrize("extra,name", [(dict(PROFIEL="full"), "PROFIEL"), (dict(EPOCHS=3), "EPOCHS"),
                                        (dict(profile="full"), "profile")])
def test_setup_refuses_a_name_the_notebook_does_not_declare(extra, name):
    with pytest.raises(C.ParameterError, match=f"notebook 01 has no parameter {name}; its parameters are "
                                               "PROFILE, SEED, SEEDS "):
        C.setup("01", kernel_namespace(PROFILE="quick", SEED=0, **extra))


@pytest.mark.parametrize("params,name", [(dict(SEED=2**32), "SEED"), (dict(SEED=True), "SEED"),
                                         (dict(TARGET_SEED=-1), "TARGET_SEED"), (dict(SEEDS=1001), "SEEDS"),
                                         (dict(EPOCHS=0), "EPOCHS")])
def test_setup_checks_values_and_bounds(params, name):
    namespace = kernel_namespace(PROFILE="quick", SEED=0, TARGET_SEED=0, EPOCHS=None, SEEDS=None)
    namespace.update(params)
    with pytest.raises(C.ParameterError, match=name):
        C.setup("06", namespace)
    C.check_parameters(SEED=2**32 - 1, TARGET_SEED=2**32 - 1, SEEDS=1000, EPOCHS=1_000_000)


def test_setup_errors_name_a_missing_parameter_and_an_unknown_notebook():
    with pytest.raises(C.ParameterError, match="parameters SEED, SEEDS are not set"):
        C.setup("01", kernel_namespace(PROFILE="quick"))
    with pytest.raises(C.ParameterError, match="parameter SEED is not set"):
        C.setup("00", kernel_namespace(PROFILE="quick"))
    with pytest.raises(C.ParameterError, match="'12' is not a notebook"):
        C.setup("12", kernel_namespace(PROFILE="quick", SEED=0))


def test_one_spelling_per_size_key():
    """Seed counts are n_seeds, Fashion-MNIST sizes one (train, val, test) tuple, in every notebook."""
    for notebook, profiles in C.NOTEBOOK_SIZES.items():
        for sizes in profiles.values():
            assert not {"seeds", "train_per_class", "fmnist_eval_per_class"} & set(sizes), notebook
            if "fmnist_per_class" in sizes:
                assert len(sizes["fmnist_per_class"]) == 3
    spec = C.fashion_mnist_spec((5, 2, 1))
    assert spec.kwargs() == {"n_per_class_train": 5, "n_per_class_val": 2, "n_per_class_test": 1}


def test_quick_and_full_differ_only_in_declared_size_keys_where_quick_is_a_miniature():
    """Rules v3 (reconstruction §8.1): quick is a miniature of full (only counts and sizes shrink,
    never the depth), a smoke test, or says why it is not yet a miniature; a notebook that becomes
    a miniature must say so here, and one that stops being one fails."""
    config = C
    assert set(config.QUICK_IS) == set(config.NOTEBOOK_SIZES)
    for notebook, status in config.QUICK_IS.items():
        sizes, other = config.profile_differences(notebook)
        if status in ("miniature", "smoke test"):
            assert other == [], f"{notebook}: quick differs from full in {other}, which are not sizes"
        elif status.startswith("not yet a miniature: "):
            assert other, f"{notebook}: quick differs only in sizes now; declare it a miniature"
        else:
            assert status == "no verdict", f"{notebook}: unknown status {status!r}"


def test_profile_differences_tell_sizes_from_settings_and_depth():
    config = C
    assert config.profile_differences("10") == (["report_sets", "epochs", "n_snapshots"], [])
    sizes, other = config.profile_differences("07")                 # rules v3: full's depth and lr
    assert other == [] and "odt_widths" in sizes and "fmnist_widths" in sizes and "epochs" in sizes
    sizes, other = config.profile_differences("08")                 # rules v3: 06's and 07's current sizes
    assert other == [] and {"n_grid", "06: n_train", "06: widths", "07: odt_widths"} <= set(sizes)   # v4: 10 seeds in both
    assert "odt_seeds" not in sizes                                  # 5 odt seeds under both profiles
    assert config.profile_differences("04")[1] == []            # a smoke test since rules v4
    assert config.profile_differences("05")[1] == []            # a smoke test since rules v3
