"""bench/translate_speed.py's table: one line a system, its speed, memory, BLEU and ratios.

from speed_table import print_table  # bench/ is a script's sys.path[0]
"""

from __future__ import annotations

from typing import Any


def print_table(rows: dict[str, dict[str, Any]], notes: dict[str, str]) -> None:
    """Each row's figures and ratios; a compiled row also says whether its outputs are mtkit-fp32's."""
    print(f"{'system':<14} {'sent/s':>8} {'tok/s':>9} {'peak RSS MiB':>13} {'BLEU':>6}  ratio")
    for system, row in rows.items():
        ratios = ", ".join(
            f"{v:.2f}x {k[3:]}" + (f" (paired {row['paired_' + k]:.2f}x)" if "paired_" + k in row else "")
            for k, v in row.items()
            if k.startswith("vs_")
        )
        if "peak_gpu_mib" in row:
            ratios = ", ".join(filter(None, [ratios, f"peak GPU {row['peak_gpu_mib']:,.0f} MiB"]))
        if "peak_pss_mib" in row:
            ratios = ", ".join(
                filter(None, [ratios, f"peak PSS {row['peak_pss_mib']:,.0f} MiB (the workers together)"])
            )
        if system == "mtkit-compiled" and "mtkit-fp32" in rows:
            same = row["outputs_sha256"] == rows["mtkit-fp32"]["outputs_sha256"]
            ratios += f", {'the same outputs as' if same else 'OUTPUTS DIFFER FROM'} mtkit-fp32"
            ratios += f", warm-up (compiling) {row['warmup_s']} s against {rows['mtkit-fp32']['warmup_s']}"
        print(
            f"{system:<14} {row['sentences_per_s']:>8.2f} {row['tgt_tokens_per_s']:>9.1f} "
            f"{row['peak_rss_mib']:>13.0f} {row['bleu'] if row['bleu'] is not None else '-':>6}  {ratios}"
        )
    for system, note in notes.items():
        print(f"{system:<14} {note}")
