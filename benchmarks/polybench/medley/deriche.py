"""deriche: PolyBench/C 4.2.1 medley/deriche/deriche.c, its init_array and kernel in float64."""

import math

import numpy as np

UPSTREAM = "medley/deriche/deriche.c"
ILLEGAL_RULE = "parallel-dependence"

ALPHA = 0.25


def init(sizes: dict) -> dict:
    w, h = sizes["W"], sizes["H"]
    img = np.zeros((w, h))
    for i in range(w):
        for j in range(h):
            img[i, j] = float((313 * i + 991 * j) % 65536) / 65535.0
    return {"imgIn": img}


def reference(inputs: dict, sizes: dict) -> dict:
    w, h = sizes["W"], sizes["H"]
    alpha = ALPHA
    img_in = inputs["imgIn"]
    y1, y2, img_out = np.zeros((w, h)), np.zeros((w, h)), np.zeros((w, h))
    exp = math.exp
    k = (1.0 - exp(-alpha)) * (1.0 - exp(-alpha)) / (1.0 + 2.0 * alpha * exp(-alpha) - exp(2.0 * alpha))
    a1 = a5 = k
    a2 = a6 = k * exp(-alpha) * (alpha - 1.0)
    a3 = a7 = k * exp(-alpha) * (alpha + 1.0)
    a4 = a8 = -k * exp(-2.0 * alpha)
    b1 = math.pow(2.0, -alpha)
    b2 = -exp(-2.0 * alpha)
    c1 = c2 = 1.0

    for i in range(w):
        ym1 = ym2 = xm1 = 0.0
        for j in range(h):
            y1[i, j] = a1 * img_in[i, j] + a2 * xm1 + b1 * ym1 + b2 * ym2
            xm1 = img_in[i, j]
            ym2 = ym1
            ym1 = y1[i, j]
    for i in range(w):
        yp1 = yp2 = xp1 = xp2 = 0.0
        for j in range(h - 1, -1, -1):
            y2[i, j] = a3 * xp1 + a4 * xp2 + b1 * yp1 + b2 * yp2
            xp2 = xp1
            xp1 = img_in[i, j]
            yp2 = yp1
            yp1 = y2[i, j]
    for i in range(w):
        for j in range(h):
            img_out[i, j] = c1 * (y1[i, j] + y2[i, j])
    for j in range(h):
        tm1 = ym1 = ym2 = 0.0
        for i in range(w):
            y1[i, j] = a5 * img_out[i, j] + a6 * tm1 + b1 * ym1 + b2 * ym2
            tm1 = img_out[i, j]
            ym2 = ym1
            ym1 = y1[i, j]
    for j in range(h):
        tp1 = tp2 = yp1 = yp2 = 0.0
        for i in range(w - 1, -1, -1):
            y2[i, j] = a7 * tp1 + a8 * tp2 + b1 * yp1 + b2 * yp2
            tp2 = tp1
            tp1 = img_out[i, j]
            yp2 = yp1
            yp1 = y2[i, j]
    for i in range(w):
        for j in range(h):
            img_out[i, j] = c2 * (y1[i, j] + y2[i, j])
    return {"imgOut": img_out}
