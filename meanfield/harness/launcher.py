"""The one launcher of every study, used by the command line (`meanfield study NAME`) and
by Python (`meanfield.run_study`): the output folder resolved and probed before anything
is made, the study's configuration (`configure(args)`), its costs checked once, here
(`cost_parts(args, cfg)`, `harness.args.check_costs`), its `run(args, cfg)`, and after
it, however it ends, the folder's lock released and JAX's precision switch as it was (a
study sets its own)."""

import contextlib
import json
from pathlib import Path

from .folder import probe_lock, release_all
from .options import parse_options, resolve_out


def prepare(study, args, *, lock: bool = True) -> None:
    """`args.out` resolved (the study's default folder where left out) and, with `lock`,
    probed: a folder another run holds is refused in one line (`StudyInputError`)
    before anything is made. A process of a several-process run other than process 0,
    which writes nothing, passes `lock=False`."""
    resolve_out(args, study)
    if lock:
        probe_lock(args.out)


def configured(study, args):
    """`study`'s configuration from its parsed options, refused in one line
    (`StudyInputError`) where an option is wrong or the run would cost more than this
    machine allows (memory, the array sizes XLA takes, the work limit): its costs are
    checked here, and only here, before anything is written."""
    from .args import check_costs

    cfg = study.configure(args)
    check_costs(study.cost_parts(args, cfg))
    return cfg


def launch(study, args, *, around: contextlib.AbstractContextManager | None = None) -> None:
    """Run `study` (a module that follows `harness.protocol.Study`) on its parsed
    options `args`, prepared (`prepare`), inside `around` (the command line's signal
    handling; none from Python): its configuration with its costs checked
    (`configured`), then `run(args, cfg)`. Whatever the run raises goes on up; the
    folder's lock is released and `jax_enable_x64` restored in every case."""
    import jax

    x64 = jax.config.read("jax_enable_x64")
    try:
        with around if around is not None else contextlib.nullcontext():
            study.run(args, configured(study, args))
    finally:
        release_all()
        jax.config.update("jax_enable_x64", x64)


def run_from_python(study, name: str, out, options: dict) -> dict:
    """`meanfield study NAME --out OUT ...` from Python, `options` by their Python names:
    every value checked by the command line's parser before anything is made, the
    release check (`allow_known_bad_jax` names the option), then `launch`. **Returns:**
    the study's `results.json`."""
    from ..runtime.releases import KnownBadReleaseError, check_release

    args = parse_options(study, name, out, options)
    try:
        check_release(allow=bool(args.allow_known_bad_jax))
    except KnownBadReleaseError as err:
        raise KnownBadReleaseError(f"allow_known_bad_jax: {err}") from None
    prepare(study, args)
    launch(study, args)
    with open(Path(args.out) / "results.json") as f:
        return json.load(f)
