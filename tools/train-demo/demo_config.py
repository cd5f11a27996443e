"""The demo model's shape: the released K3 graph at a size this machine trains in about an hour
and `dist/k3` carries in about 14 MB (bf16 trunk, MXFP4 experts)."""
from config import Config


def demo_config(vocab: int) -> Config:
    return Config(
        E=256, L=9, V=vocab, eps=1e-5,
        Hk=4, D=32, Kc=4, gmin=-5.0,
        H=4, Rq=128, Rkv=64, dn=32, dr=16, dv=32,
        Ne=32, k=4, Ns=2, Lam=128, I=64, rho=1.0,
        F=1, Id=512, S=3, beta1=4.0, beta2=25.0,
        # three KDA then one MLA, and the released extra MLA at the end: K K K M K K K M M
        full_attn_layers=(4, 8, 9),
    )
