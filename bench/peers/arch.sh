# The architectures the peers' scripts train, by mtkit's names for them (sourced, not run).
# small: mtkit's `small` preset (3+3 layers, d 256, ffn 1024, 4 heads); big: fairseq's transformer_wmt_en_de,
# which is the paper's base (6+6 layers, d 512, ffn 2048, 8 heads).
peer_arch() {
    case $1 in
        small) ARCH=(--arch transformer --encoder-layers 3 --decoder-layers 3 --encoder-embed-dim 256
                     --decoder-embed-dim 256 --encoder-ffn-embed-dim 1024 --decoder-ffn-embed-dim 1024
                     --encoder-attention-heads 4 --decoder-attention-heads 4) ;;
        big) ARCH=(--arch transformer_wmt_en_de) ;;
        *) echo "unknown architecture '$1' (small or big)" >&2; return 2 ;;
    esac
}
