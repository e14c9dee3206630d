// What the programs (programs.cpp) and their disguises (disguise.cpp) share: the hooks by which a
// disguise adds its rows, its ops at blocks 1 and 2 and its quantities to a program. Not part of
// construct's interface.
#pragma once

#include "construct/construct.hpp"

namespace icl::construct::detail {

// The rows a disguise adds (after the program's own), and the checks of its settings.
void AddDisguiseRows(Construction& c, int d);
// Extra ops of block 1's MLP.
void AddBlock1Disguise(Construction& c, int d);
// Extra ops of block 2's attention.
void AddBlock2AttentionDisguise(Construction& c, int d);
// Extra ops of block 2's MLP.
void AddBlock2MlpDisguise(Construction& c, double mean_range);
// The nuisance's removal, in the first MLP after block 2 (or in a block of its own).
void AddNuisanceRemoval(Construction& c, bool own_block);
// The disguise's quantities, and the checks of its sizes against the program's width.
void AddDisguiseQuantities(Construction& c);

}  // namespace icl::construct::detail
