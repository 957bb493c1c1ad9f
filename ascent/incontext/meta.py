"""`python -m ascent.incontext.meta NAME [seeds=[0,1,2]] [out=FILE.json] [key=value ...]`: one meta-RL method's
experiment (`ascent list meta_methods --params`) over several seeds, with its paired differences against its control.
Importing this module registers every method (ascent/incontext/methods.py holds the registry)."""

from __future__ import annotations

from ascent.incontext import evolve, lhf, meta_rtl, relic  # noqa: F401  (register into META_METHODS)
from ascent.incontext.methods import META_METHODS, PAIRS, run_seeds


def main(argv: list[str] | None = None) -> int:
    """`python -m ascent.incontext.meta NAME [seeds=[0,1,2]] [out=FILE.json] [key=value ...]`: the method's
    experiment over the seeds, its paired differences printed and written to `out`; a bad key is one line."""
    import json
    import sys

    import yaml

    from ascent.typed import ConfigError, build

    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] not in META_METHODS:
        print(f"usage: python -m ascent.incontext.meta NAME key=value ...; NAME one of {META_METHODS.names()}")
        return 2
    name, raw, seeds, out = args[0], {}, [0], None
    for item in args[1:]:
        key, _, text = item.partition("=")
        value = yaml.safe_load(text) if text else text
        if key == "seeds":
            seeds = [int(s) for s in value]
        elif key == "out":
            out = str(value)
        else:
            sub = raw
            for k in key.split(".")[:-1]:
                sub = sub.setdefault(k, {})
            sub[key.split(".")[-1]] = value
    entry = META_METHODS.entry(name)
    try:
        params = build(entry.params, raw, prefix=name)
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    summary = run_seeds(name, params, seeds, PAIRS[name])
    summary["params"] = repr(params)
    for key, value in summary.items():
        if key.startswith("diff_"):
            ci = value["ci95"]
            print(f"{key}: {value['mean']:+.4g} (sd {value['sd']}, 95% {ci})")
    if out:
        with open(out, "w") as f:
            json.dump(summary, f, indent=1, default=float)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
