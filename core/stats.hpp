// Small statistical constants shared by the stages that state intervals.
#pragma once

namespace icl::core {

// The 97.5% quantile of Student's t with `df` degrees of freedom (a two-sided 95% interval is
// estimate +- StudentT975(df) * standard error); 1.96, the normal's, above 30 degrees of freedom.
// Requires df >= 1.
inline double StudentT975(int df) {
  static constexpr double kTable[] = {12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306,
                                      2.262,  2.228, 2.201, 2.179, 2.160, 2.145, 2.131, 2.120,
                                      2.110,  2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064,
                                      2.060,  2.056, 2.052, 2.048, 2.045, 2.042};
  return df <= 30 ? kTable[df - 1] : 1.96;
}

}  // namespace icl::core
