// Vector exp, tanh, erf and the activations built on them, for any Simd
// traits type S (SimdAvx2, SimdAvx512). Accurate to a few ulp over the whole
// float range: the tests measure the error against libm.
#pragma once

namespace kiln::cpu {

// e^x. Splits x = n ln2 + r with |r| <= ln2/2 (ln2 in two parts so that
// n * ln2_hi is exact), takes e^r from its Taylor series to r^7 (truncation
// below 6e-9 relative), and scales by 2^n in two steps so that results down
// in the subnormals and up to overflow come out right. exp(-inf) = 0,
// exp(+inf) = inf, NaN stays NaN.
template <class S>
typename S::V VecExp(typename S::V x) {
  using V = typename S::V;
  const V clamped = S::Min(S::Max(x, S::Set1(-104.0f)), S::Set1(89.0f));
  const V n = S::IntToFloat(S::RoundToInt(S::Mul(clamped, S::Set1(1.44269504088896341f))));
  V r = S::Fnma(n, S::Set1(0.693359375f), clamped);
  r = S::Fnma(n, S::Set1(-2.12194440e-4f), r);
  V p = S::Set1(1.0f / 5040.0f);
  p = S::Fma(p, r, S::Set1(1.0f / 720.0f));
  p = S::Fma(p, r, S::Set1(1.0f / 120.0f));
  p = S::Fma(p, r, S::Set1(1.0f / 24.0f));
  p = S::Fma(p, r, S::Set1(1.0f / 6.0f));
  p = S::Fma(p, r, S::Set1(0.5f));
  p = S::Fma(p, r, S::Set1(1.0f));
  p = S::Fma(p, r, S::Set1(1.0f));
  // n in [-150, 128]: 2^n = 2^(n/2 rounded down) * 2^(the rest), each factor a normal float.
  const auto ni = S::RoundToInt(n);
  const auto n1 = S::HalfDown(ni);
  const V result = S::Mul(S::Mul(p, S::Pow2(n1)), S::Pow2(S::SubInt(ni, n1)));
  return S::Select(S::IsNan(x), x, result);
}

// tanh(x). Near zero the odd Taylor series (9 terms, |x| < 0.55); beyond,
// 1 - 2 / (e^(2|x|) + 1), which has no cancellation there.
template <class S>
typename S::V VecTanh(typename S::V x) {
  using V = typename S::V;
  const V a = S::Abs(x);
  const V z = S::Mul(x, x);
  V p = S::Set1(5.90027440945586e-4f);
  p = S::Fma(p, z, S::Set1(-1.45583438705131827e-3f));
  p = S::Fma(p, z, S::Set1(3.59212803657248102e-3f));
  p = S::Fma(p, z, S::Set1(-8.86323552990219657e-3f));
  p = S::Fma(p, z, S::Set1(2.18694885361552028e-2f));
  p = S::Fma(p, z, S::Set1(-5.39682539682539683e-2f));
  p = S::Fma(p, z, S::Set1(1.33333333333333333e-1f));
  p = S::Fma(p, z, S::Set1(-3.33333333333333333e-1f));
  const V small = S::Fma(S::Mul(p, z), x, x);
  const V e = VecExp<S>(S::Add(a, a));
  const V large = S::Sub(S::Set1(1.0f), S::Div(S::Set1(2.0f), S::Add(e, S::Set1(1.0f))));
  const V signed_large = S::Xor(large, S::SignBit(x));
  return S::Select(S::Less(a, S::Set1(0.55f)), small, signed_large);
}

// erf(x) for |x| < 1: x * P(x^2), P a least-squares fit of erf(x)/x
// (relative error 1e-10 before rounding).
template <class S>
typename S::V VecErfSmall(typename S::V x) {
  using V = typename S::V;
  const V z = S::Mul(x, x);
  V p = S::Set1(-9.768951589e-06f);
  p = S::Fma(p, z, S::Set1(1.129944755e-04f));
  p = S::Fma(p, z, S::Set1(-8.488377709e-04f));
  p = S::Fma(p, z, S::Set1(5.221303265e-03f));
  p = S::Fma(p, z, S::Set1(-2.686551797e-02f));
  p = S::Fma(p, z, S::Set1(1.128378382e-01f));
  p = S::Fma(p, z, S::Set1(-3.761263854e-01f));
  p = S::Fma(p, z, S::Set1(1.128379167e+00f));
  return S::Mul(x, p);
}

// erfc(a) for a >= 0.5, given a^2 = sq_hi + sq_lo exactly: e^(-a^2) * Q(a),
// Q a least-squares fit in t = 1 / (1 + a/2), mapped to [-1, 1] (relative
// error 3e-10 before rounding, on a in [0.5, 10.5]; beyond, e^(-a^2)
// underflows). The exact square keeps the exponential's argument exact:
// a rounded a^2 alone would cost up to |a|^2 * 2^-23 relative error.
template <class S>
typename S::V VecErfcLarge(typename S::V a, typename S::V sq_hi, typename S::V sq_lo) {
  using V = typename S::V;
  a = S::Min(a, S::Set1(10.5f));
  const V t = S::Div(S::Set1(1.0f), S::Fma(a, S::Set1(0.5f), S::Set1(1.0f)));
  const V u = S::Fma(t, S::Set1(3.125f), S::Set1(-1.5f));
  V q = S::Set1(2.388815763e-07f);
  q = S::Fma(q, u, S::Set1(3.793571764e-08f));
  q = S::Fma(q, u, S::Set1(-3.312079775e-06f));
  q = S::Fma(q, u, S::Set1(3.146375556e-06f));
  q = S::Fma(q, u, S::Set1(4.215892130e-05f));
  q = S::Fma(q, u, S::Set1(-7.695251392e-05f));
  q = S::Fma(q, u, S::Set1(-7.260125948e-04f));
  q = S::Fma(q, u, S::Set1(8.572998170e-04f));
  q = S::Fma(q, u, S::Set1(2.051815289e-02f));
  q = S::Fma(q, u, S::Set1(9.511773929e-02f));
  q = S::Fma(q, u, S::Set1(2.612679963e-01f));
  q = S::Fma(q, u, S::Set1(2.386898512e-01f));
  V e = VecExp<S>(S::Sub(S::Zero(), sq_hi));
  e = S::Fnma(e, sq_lo, e);  // e^(-hi - lo) ~ e^(-hi) (1 - lo), |lo| tiny
  return S::Mul(e, q);
}

// The exact square of a: hi = a*a rounded, lo = the rounding error.
template <class S>
void VecExactSquare(typename S::V a, typename S::V& hi, typename S::V& lo) {
  hi = S::Mul(a, a);
  lo = S::Fma(a, a, S::Sub(S::Zero(), hi));
}

template <class S>
typename S::V VecErf(typename S::V x) {
  using V = typename S::V;
  const V a = S::Min(S::Max(S::Abs(x), S::Set1(0.5f)), S::Set1(10.5f));  // erfc(10.5) = 0 in fp32
  V sq_hi, sq_lo;
  VecExactSquare<S>(a, sq_hi, sq_lo);
  const V large = S::Sub(S::Set1(1.0f), VecErfcLarge<S>(a, sq_hi, sq_lo));
  const V result =
      S::Select(S::Less(S::Abs(x), S::Set1(1.0f)), VecErfSmall<S>(x), S::Xor(large, S::SignBit(x)));
  return S::Select(S::IsNan(x), x, result);
}

// x * sigmoid(x) = x / (1 + e^-x).
template <class S>
typename S::V VecSilu(typename S::V x) {
  using V = typename S::V;
  const V e = VecExp<S>(S::Sub(S::Zero(), x));
  return S::Div(x, S::Add(S::Set1(1.0f), e));
}

// x/2 * (1 + erf(z)), z = x / sqrt 2. For z < -0.5 the bracket is taken as
// erfc(-z) to avoid cancelling 1 against erf ~ -1, with z^2 = x^2 / 2 split
// exactly into hi + lo from x itself (z is rounded, x^2 / 2 need not be), so
// that the far negative tail keeps its relative accuracy.
template <class S>
typename S::V VecGelu(typename S::V x) {
  using V = typename S::V;
  const V z = S::Mul(x, S::Set1(0.707106781186547524f));
  const V one = S::Set1(1.0f);
  const V half = S::Set1(0.5f);
  // |x| beyond 15 changes nothing (erfc(15 / sqrt 2) = 0 in fp32) but would
  // square to inf - inf = NaN in the rounding error.
  const V bounded = S::Min(S::Max(x, S::Set1(-15.0f)), S::Set1(15.0f));
  V sq_hi, sq_lo;
  VecExactSquare<S>(bounded, sq_hi, sq_lo);
  sq_hi = S::Mul(sq_hi, half);  // halving is exact
  sq_lo = S::Mul(sq_lo, half);
  const V near = S::Add(one, VecErfSmall<S>(z));
  const V above = S::Sub(S::Set1(2.0f), VecErfcLarge<S>(S::Max(z, half), sq_hi, sq_lo));
  const V below = VecErfcLarge<S>(S::Max(S::Sub(S::Zero(), z), half), sq_hi, sq_lo);
  V bracket = S::Select(S::Less(z, one), near, above);
  bracket = S::Select(S::Less(z, S::Set1(-0.5f)), below, bracket);
  return S::Mul(S::Mul(x, half), bracket);
}

// x/2 * (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3), computed as
// x / (1 + e^(-2u)), which equals it and never cancels.
template <class S>
typename S::V VecGeluTanh(typename S::V x) {
  using V = typename S::V;
  const V x3 = S::Mul(S::Mul(x, x), x);
  const V u = S::Mul(S::Set1(0.797884560802865356f), S::Fma(x3, S::Set1(0.044715f), x));
  const V e = VecExp<S>(S::Mul(u, S::Set1(-2.0f)));
  return S::Div(x, S::Add(S::Set1(1.0f), e));
}

}  // namespace kiln::cpu
