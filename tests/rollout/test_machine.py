"""`ascent.kernels.machine`: the CPU features read from /proc/cpuinfo (what paths are chosen by) and the
machine description every benchmark prints."""

from __future__ import annotations

from ascent.kernels import machine

ZEN3 = "model name\t: AMD EPYC 7B13\nflags\t\t: fpu sse2 avx fma avx2 bmi2 sha_ni\n"
SAPPHIRE_RAPIDS = (
    "model name\t: Intel(R) Xeon(R) Platinum 8481C\n"
    "flags\t\t: fpu avx fma avx2 avx512f avx512_vnni avx512_bf16 amx_bf16 amx_tile amx_int8\n"
)
GRAVITON = "processor\t: 0\nFeatures\t: fp asimd evtstrm aes crc32 bf16 i8mm\n"


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_features_by_machine_kind(tmp_path):
    zen3 = machine.features(write(tmp_path, "zen3", ZEN3))
    assert zen3["avx2"] and zen3["fma"] and not zen3["avx512f"] and not zen3["amx_bf16"]
    spr = machine.features(write(tmp_path, "spr", SAPPHIRE_RAPIDS))
    assert spr["avx512f"] and spr["avx512_bf16"] and spr["amx_bf16"] and spr["amx_tile"] and spr["avx512_vnni"]
    arm = machine.features(write(tmp_path, "arm", GRAVITON))
    assert arm["neon"] and arm["arm_bf16"] and not arm["avx2"]
    assert machine.features(str(tmp_path / "missing")) is None


def test_native_bf16_and_summary(tmp_path):
    zen3, spr = write(tmp_path, "zen3", ZEN3), write(tmp_path, "spr", SAPPHIRE_RAPIDS)
    assert machine.native_bf16(zen3) is False
    assert machine.native_bf16(spr) is True
    assert machine.native_bf16(write(tmp_path, "arm", GRAVITON)) is True
    assert machine.native_bf16(str(tmp_path / "missing")) is None
    assert machine.isa_summary(zen3) == "avx2 fma"
    assert machine.isa_summary(spr) == "avx2 fma avx512f avx512_bf16 avx512_vnni amx_tile amx_bf16"
    assert machine.cpu_model(spr) == "Intel(R) Xeon(R) Platinum 8481C"  # no family / model lines: the name only


def test_cpu_model_names_the_microarchitecture(tmp_path):
    def cpuinfo(vendor, family, model, name="AMD EPYC"):
        return f"vendor_id\t: {vendor}\ncpu family\t: {family}\nmodel\t\t: {model}\nmodel name\t: {name}\n"

    zen1 = write(tmp_path, "zen1", cpuinfo("AuthenticAMD", 23, 1))
    assert machine.cpu_model(zen1) == "AMD EPYC (family 23 model 1, Zen/Zen+)"
    assert machine.cpu_model(write(tmp_path, "zen4", cpuinfo("AuthenticAMD", 25, 17))).endswith("model 17, Zen 4)")
    assert machine.cpu_model(write(tmp_path, "zen3", cpuinfo("AuthenticAMD", 25, 1))).endswith("Zen 3)")
    spr = write(tmp_path, "spr", cpuinfo("GenuineIntel", 6, 143, "Intel(R) Xeon(R) Platinum 8481C"))
    assert machine.cpu_model(spr) == "Intel(R) Xeon(R) Platinum 8481C (family 6 model 143, Sapphire Rapids)"
    assert machine.cpu_model(write(tmp_path, "new", cpuinfo("AuthenticAMD", 99, 1))) == "AMD EPYC (family 99 model 1)"


def test_describe_names_the_machine():
    d = machine.describe()
    assert {"cpu", "isa", "cpus", "torch_threads", "load", "torch", "python"} <= set(d)
    line = machine.describe_line()
    assert str(d["cpu"]) in line and "torch" in line and "load" in line


def test_rollout_precision_auto_follows_the_hardware(monkeypatch):
    from ascent.config import load_config
    from ascent.rollout import backends

    cfg = load_config("default", ["rollout.precision=auto"])
    assert cfg.algorithm.tis_cap is None
    monkeypatch.setattr(machine, "native_bf16", lambda path="/proc/cpuinfo": False)
    monkeypatch.setattr(machine, "amx_bf16", lambda path="/proc/cpuinfo": False)
    plain, why = backends.resolve_rollout_precision(cfg)
    assert plain.rollout.precision == "model" and plain.algorithm.tis_cap is None and "emulated" in why
    assert backends.make_engine(cfg.rollout).precision == "model"
    monkeypatch.setattr(machine, "native_bf16", lambda path="/proc/cpuinfo": True)  # AVX512-BF16, no AMX
    zen4, why = backends.resolve_rollout_precision(cfg)
    assert zen4.rollout.precision == "model" and "no faster" in why
    monkeypatch.setattr(machine, "amx_bf16", lambda path="/proc/cpuinfo": True)
    fast, why = backends.resolve_rollout_precision(cfg)
    assert fast.rollout.precision == "bfloat16" and fast.algorithm.tis_cap == backends.AUTO_TIS_CAP
    assert why.startswith("auto -> bfloat16") and "tis_cap" in why
    kept, _ = backends.resolve_rollout_precision(
        load_config("default", ["rollout.precision=auto", "algorithm.tis_cap=3"])
    )
    assert kept.algorithm.tis_cap == 3  # a cap the user set stays
    assert backends.make_engine(cfg.rollout).precision == "bfloat16"
    hf, why = backends.resolve_rollout_precision(
        load_config("default", ["rollout.precision=auto", "rollout.backend=hf"])
    )
    assert hf.rollout.precision == "model" and "'hf' backend" in why
    same, why = backends.resolve_rollout_precision(load_config("default", []))
    assert same.rollout.precision == "model" and why is None
