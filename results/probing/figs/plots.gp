# gnuplot script written by iclprobe report; rerun with: gnuplot plots.gp
set datafile separator ','
set key outside right top
set grid
set terminal pngcairo size 900,560
set output 'w_ols_r2_by_layer.png'
set title 'w_ols: test R^2 by layer (k = 12)' noenhanced
set xlabel 'layer (0 = embedding)'
set ylabel 'R^2'
set yrange [*:1.05]
set xtics 1
plot 'w_ols_r2_by_layer.csv' using 1:2 with linespoints lw 2 dt 1 lc rgb '#1f77b4' title 'ridge model' noenhanced, 'w_ols_r2_by_layer.csv' using 1:3 with linespoints lw 2 dt 3 lc rgb '#1f77b4' title 'ridge acts_init' noenhanced, 'w_ols_r2_by_layer.csv' using 1:4 with linespoints lw 2 dt 4 lc rgb '#1f77b4' title 'ridge acts_fixedw' noenhanced, 'w_ols_r2_by_layer.csv' using 1:5 with linespoints lw 2 dt 5 lc rgb '#1f77b4' title 'ridge shuffled' noenhanced, 'w_ols_r2_by_layer.csv' using 1:6 with linespoints lw 2 dt 1 lc rgb '#d62728' title 'linear model' noenhanced, 'w_ols_r2_by_layer.csv' using 1:7 with linespoints lw 2 dt 3 lc rgb '#d62728' title 'linear acts_init' noenhanced, 'w_ols_r2_by_layer.csv' using 1:8 with linespoints lw 2 dt 4 lc rgb '#d62728' title 'linear acts_fixedw' noenhanced, 'w_ols_r2_by_layer.csv' using 1:9 with linespoints lw 2 dt 5 lc rgb '#d62728' title 'linear shuffled' noenhanced, 'w_ols_r2_by_layer.csv' using 1:10 with linespoints lw 2 dt 1 lc rgb '#2ca02c' title 'mlp model' noenhanced, 'w_ols_r2_by_layer.csv' using 1:11 with linespoints lw 2 dt 3 lc rgb '#2ca02c' title 'mlp acts_init' noenhanced, 'w_ols_r2_by_layer.csv' using 1:12 with linespoints lw 2 dt 4 lc rgb '#2ca02c' title 'mlp acts_fixedw' noenhanced, 'w_ols_r2_by_layer.csv' using 1:13 with linespoints lw 2 dt 5 lc rgb '#2ca02c' title 'mlp shuffled' noenhanced
set terminal svg size 900,560
set output 'w_ols_r2_by_layer.svg'
set title 'w_ols: test R^2 by layer (k = 12)' noenhanced
set xlabel 'layer (0 = embedding)'
set ylabel 'R^2'
set yrange [*:1.05]
set xtics 1
plot 'w_ols_r2_by_layer.csv' using 1:2 with linespoints lw 2 dt 1 lc rgb '#1f77b4' title 'ridge model' noenhanced, 'w_ols_r2_by_layer.csv' using 1:3 with linespoints lw 2 dt 3 lc rgb '#1f77b4' title 'ridge acts_init' noenhanced, 'w_ols_r2_by_layer.csv' using 1:4 with linespoints lw 2 dt 4 lc rgb '#1f77b4' title 'ridge acts_fixedw' noenhanced, 'w_ols_r2_by_layer.csv' using 1:5 with linespoints lw 2 dt 5 lc rgb '#1f77b4' title 'ridge shuffled' noenhanced, 'w_ols_r2_by_layer.csv' using 1:6 with linespoints lw 2 dt 1 lc rgb '#d62728' title 'linear model' noenhanced, 'w_ols_r2_by_layer.csv' using 1:7 with linespoints lw 2 dt 3 lc rgb '#d62728' title 'linear acts_init' noenhanced, 'w_ols_r2_by_layer.csv' using 1:8 with linespoints lw 2 dt 4 lc rgb '#d62728' title 'linear acts_fixedw' noenhanced, 'w_ols_r2_by_layer.csv' using 1:9 with linespoints lw 2 dt 5 lc rgb '#d62728' title 'linear shuffled' noenhanced, 'w_ols_r2_by_layer.csv' using 1:10 with linespoints lw 2 dt 1 lc rgb '#2ca02c' title 'mlp model' noenhanced, 'w_ols_r2_by_layer.csv' using 1:11 with linespoints lw 2 dt 3 lc rgb '#2ca02c' title 'mlp acts_init' noenhanced, 'w_ols_r2_by_layer.csv' using 1:12 with linespoints lw 2 dt 4 lc rgb '#2ca02c' title 'mlp acts_fixedw' noenhanced, 'w_ols_r2_by_layer.csv' using 1:13 with linespoints lw 2 dt 5 lc rgb '#2ca02c' title 'mlp shuffled' noenhanced
set terminal pngcairo size 800,560
set output 'w_ols_ridge_heatmap.png'
set datafile separator whitespace
set title 'w_ols (ridge): test R^2 over layer and k' noenhanced
set xlabel 'layer'
set ylabel 'k (examples)'
set yrange [*:*]
set cbrange [0:1]
set palette rgb 33,13,10
set view map
plot 'w_ols_ridge_heatmap.dat' using 1:2:3 with image notitle
set datafile separator ','
set terminal svg size 800,560
set output 'w_ols_ridge_heatmap.svg'
set datafile separator whitespace
set title 'w_ols (ridge): test R^2 over layer and k' noenhanced
set xlabel 'layer'
set ylabel 'k (examples)'
set yrange [*:*]
set cbrange [0:1]
set palette rgb 33,13,10
set view map
plot 'w_ols_ridge_heatmap.dat' using 1:2:3 with image notitle
set datafile separator ','
set terminal pngcairo size 800,560
set output 'w_ols_linear_heatmap.png'
set datafile separator whitespace
set title 'w_ols (linear): test R^2 over layer and k' noenhanced
set xlabel 'layer'
set ylabel 'k (examples)'
set yrange [*:*]
set cbrange [0:1]
set palette rgb 33,13,10
set view map
plot 'w_ols_linear_heatmap.dat' using 1:2:3 with image notitle
set datafile separator ','
set terminal svg size 800,560
set output 'w_ols_linear_heatmap.svg'
set datafile separator whitespace
set title 'w_ols (linear): test R^2 over layer and k' noenhanced
set xlabel 'layer'
set ylabel 'k (examples)'
set yrange [*:*]
set cbrange [0:1]
set palette rgb 33,13,10
set view map
plot 'w_ols_linear_heatmap.dat' using 1:2:3 with image notitle
set datafile separator ','
set terminal pngcairo size 800,560
set output 'w_ols_mlp_heatmap.png'
set datafile separator whitespace
set title 'w_ols (mlp): test R^2 over layer and k' noenhanced
set xlabel 'layer'
set ylabel 'k (examples)'
set yrange [*:*]
set cbrange [0:1]
set palette rgb 33,13,10
set view map
plot 'w_ols_mlp_heatmap.dat' using 1:2:3 with image notitle
set datafile separator ','
set terminal svg size 800,560
set output 'w_ols_mlp_heatmap.svg'
set datafile separator whitespace
set title 'w_ols (mlp): test R^2 over layer and k' noenhanced
set xlabel 'layer'
set ylabel 'k (examples)'
set yrange [*:*]
set cbrange [0:1]
set palette rgb 33,13,10
set view map
plot 'w_ols_mlp_heatmap.dat' using 1:2:3 with image notitle
set datafile separator ','
set terminal pngcairo size 900,560
set output 'xtx_r2_by_layer.png'
set title 'xtx: test R^2 by layer (k = 12)' noenhanced
set xlabel 'layer (0 = embedding)'
set ylabel 'R^2'
set yrange [*:1.05]
set xtics 1
plot 'xtx_r2_by_layer.csv' using 1:2 with linespoints lw 2 dt 1 lc rgb '#1f77b4' title 'ridge model' noenhanced, 'xtx_r2_by_layer.csv' using 1:3 with linespoints lw 2 dt 3 lc rgb '#1f77b4' title 'ridge acts_init' noenhanced, 'xtx_r2_by_layer.csv' using 1:4 with linespoints lw 2 dt 4 lc rgb '#1f77b4' title 'ridge acts_fixedw' noenhanced, 'xtx_r2_by_layer.csv' using 1:5 with linespoints lw 2 dt 5 lc rgb '#1f77b4' title 'ridge shuffled' noenhanced, 'xtx_r2_by_layer.csv' using 1:6 with linespoints lw 2 dt 1 lc rgb '#d62728' title 'linear model' noenhanced, 'xtx_r2_by_layer.csv' using 1:7 with linespoints lw 2 dt 3 lc rgb '#d62728' title 'linear acts_init' noenhanced, 'xtx_r2_by_layer.csv' using 1:8 with linespoints lw 2 dt 4 lc rgb '#d62728' title 'linear acts_fixedw' noenhanced, 'xtx_r2_by_layer.csv' using 1:9 with linespoints lw 2 dt 5 lc rgb '#d62728' title 'linear shuffled' noenhanced, 'xtx_r2_by_layer.csv' using 1:10 with linespoints lw 2 dt 1 lc rgb '#2ca02c' title 'mlp model' noenhanced, 'xtx_r2_by_layer.csv' using 1:11 with linespoints lw 2 dt 3 lc rgb '#2ca02c' title 'mlp acts_init' noenhanced, 'xtx_r2_by_layer.csv' using 1:12 with linespoints lw 2 dt 4 lc rgb '#2ca02c' title 'mlp acts_fixedw' noenhanced, 'xtx_r2_by_layer.csv' using 1:13 with linespoints lw 2 dt 5 lc rgb '#2ca02c' title 'mlp shuffled' noenhanced
set terminal svg size 900,560
set output 'xtx_r2_by_layer.svg'
set title 'xtx: test R^2 by layer (k = 12)' noenhanced
set xlabel 'layer (0 = embedding)'
set ylabel 'R^2'
set yrange [*:1.05]
set xtics 1
plot 'xtx_r2_by_layer.csv' using 1:2 with linespoints lw 2 dt 1 lc rgb '#1f77b4' title 'ridge model' noenhanced, 'xtx_r2_by_layer.csv' using 1:3 with linespoints lw 2 dt 3 lc rgb '#1f77b4' title 'ridge acts_init' noenhanced, 'xtx_r2_by_layer.csv' using 1:4 with linespoints lw 2 dt 4 lc rgb '#1f77b4' title 'ridge acts_fixedw' noenhanced, 'xtx_r2_by_layer.csv' using 1:5 with linespoints lw 2 dt 5 lc rgb '#1f77b4' title 'ridge shuffled' noenhanced, 'xtx_r2_by_layer.csv' using 1:6 with linespoints lw 2 dt 1 lc rgb '#d62728' title 'linear model' noenhanced, 'xtx_r2_by_layer.csv' using 1:7 with linespoints lw 2 dt 3 lc rgb '#d62728' title 'linear acts_init' noenhanced, 'xtx_r2_by_layer.csv' using 1:8 with linespoints lw 2 dt 4 lc rgb '#d62728' title 'linear acts_fixedw' noenhanced, 'xtx_r2_by_layer.csv' using 1:9 with linespoints lw 2 dt 5 lc rgb '#d62728' title 'linear shuffled' noenhanced, 'xtx_r2_by_layer.csv' using 1:10 with linespoints lw 2 dt 1 lc rgb '#2ca02c' title 'mlp model' noenhanced, 'xtx_r2_by_layer.csv' using 1:11 with linespoints lw 2 dt 3 lc rgb '#2ca02c' title 'mlp acts_init' noenhanced, 'xtx_r2_by_layer.csv' using 1:12 with linespoints lw 2 dt 4 lc rgb '#2ca02c' title 'mlp acts_fixedw' noenhanced, 'xtx_r2_by_layer.csv' using 1:13 with linespoints lw 2 dt 5 lc rgb '#2ca02c' title 'mlp shuffled' noenhanced
set terminal pngcairo size 800,560
set output 'xtx_ridge_heatmap.png'
set datafile separator whitespace
set title 'xtx (ridge): test R^2 over layer and k' noenhanced
set xlabel 'layer'
set ylabel 'k (examples)'
set yrange [*:*]
set cbrange [0:1]
set palette rgb 33,13,10
set view map
plot 'xtx_ridge_heatmap.dat' using 1:2:3 with image notitle
set datafile separator ','
set terminal svg size 800,560
set output 'xtx_ridge_heatmap.svg'
set datafile separator whitespace
set title 'xtx (ridge): test R^2 over layer and k' noenhanced
set xlabel 'layer'
set ylabel 'k (examples)'
set yrange [*:*]
set cbrange [0:1]
set palette rgb 33,13,10
set view map
plot 'xtx_ridge_heatmap.dat' using 1:2:3 with image notitle
set datafile separator ','
set terminal pngcairo size 800,560
set output 'xtx_linear_heatmap.png'
set datafile separator whitespace
set title 'xtx (linear): test R^2 over layer and k' noenhanced
set xlabel 'layer'
set ylabel 'k (examples)'
set yrange [*:*]
set cbrange [0:1]
set palette rgb 33,13,10
set view map
plot 'xtx_linear_heatmap.dat' using 1:2:3 with image notitle
set datafile separator ','
set terminal svg size 800,560
set output 'xtx_linear_heatmap.svg'
set datafile separator whitespace
set title 'xtx (linear): test R^2 over layer and k' noenhanced
set xlabel 'layer'
set ylabel 'k (examples)'
set yrange [*:*]
set cbrange [0:1]
set palette rgb 33,13,10
set view map
plot 'xtx_linear_heatmap.dat' using 1:2:3 with image notitle
set datafile separator ','
set terminal pngcairo size 800,560
set output 'xtx_mlp_heatmap.png'
set datafile separator whitespace
set title 'xtx (mlp): test R^2 over layer and k' noenhanced
set xlabel 'layer'
set ylabel 'k (examples)'
set yrange [*:*]
set cbrange [0:1]
set palette rgb 33,13,10
set view map
plot 'xtx_mlp_heatmap.dat' using 1:2:3 with image notitle
set datafile separator ','
set terminal svg size 800,560
set output 'xtx_mlp_heatmap.svg'
set datafile separator whitespace
set title 'xtx (mlp): test R^2 over layer and k' noenhanced
set xlabel 'layer'
set ylabel 'k (examples)'
set yrange [*:*]
set cbrange [0:1]
set palette rgb 33,13,10
set view map
plot 'xtx_mlp_heatmap.dat' using 1:2:3 with image notitle
set datafile separator ','
set terminal pngcairo size 900,560
set output 'xty_r2_by_layer.png'
set title 'xty: test R^2 by layer (k = 12)' noenhanced
set xlabel 'layer (0 = embedding)'
set ylabel 'R^2'
set yrange [*:1.05]
set xtics 1
plot 'xty_r2_by_layer.csv' using 1:2 with linespoints lw 2 dt 1 lc rgb '#1f77b4' title 'ridge model' noenhanced, 'xty_r2_by_layer.csv' using 1:3 with linespoints lw 2 dt 3 lc rgb '#1f77b4' title 'ridge acts_init' noenhanced, 'xty_r2_by_layer.csv' using 1:4 with linespoints lw 2 dt 4 lc rgb '#1f77b4' title 'ridge acts_fixedw' noenhanced, 'xty_r2_by_layer.csv' using 1:5 with linespoints lw 2 dt 5 lc rgb '#1f77b4' title 'ridge shuffled' noenhanced, 'xty_r2_by_layer.csv' using 1:6 with linespoints lw 2 dt 1 lc rgb '#d62728' title 'linear model' noenhanced, 'xty_r2_by_layer.csv' using 1:7 with linespoints lw 2 dt 3 lc rgb '#d62728' title 'linear acts_init' noenhanced, 'xty_r2_by_layer.csv' using 1:8 with linespoints lw 2 dt 4 lc rgb '#d62728' title 'linear acts_fixedw' noenhanced, 'xty_r2_by_layer.csv' using 1:9 with linespoints lw 2 dt 5 lc rgb '#d62728' title 'linear shuffled' noenhanced, 'xty_r2_by_layer.csv' using 1:10 with linespoints lw 2 dt 1 lc rgb '#2ca02c' title 'mlp model' noenhanced, 'xty_r2_by_layer.csv' using 1:11 with linespoints lw 2 dt 3 lc rgb '#2ca02c' title 'mlp acts_init' noenhanced, 'xty_r2_by_layer.csv' using 1:12 with linespoints lw 2 dt 4 lc rgb '#2ca02c' title 'mlp acts_fixedw' noenhanced, 'xty_r2_by_layer.csv' using 1:13 with linespoints lw 2 dt 5 lc rgb '#2ca02c' title 'mlp shuffled' noenhanced
set terminal svg size 900,560
set output 'xty_r2_by_layer.svg'
set title 'xty: test R^2 by layer (k = 12)' noenhanced
set xlabel 'layer (0 = embedding)'
set ylabel 'R^2'
set yrange [*:1.05]
set xtics 1
plot 'xty_r2_by_layer.csv' using 1:2 with linespoints lw 2 dt 1 lc rgb '#1f77b4' title 'ridge model' noenhanced, 'xty_r2_by_layer.csv' using 1:3 with linespoints lw 2 dt 3 lc rgb '#1f77b4' title 'ridge acts_init' noenhanced, 'xty_r2_by_layer.csv' using 1:4 with linespoints lw 2 dt 4 lc rgb '#1f77b4' title 'ridge acts_fixedw' noenhanced, 'xty_r2_by_layer.csv' using 1:5 with linespoints lw 2 dt 5 lc rgb '#1f77b4' title 'ridge shuffled' noenhanced, 'xty_r2_by_layer.csv' using 1:6 with linespoints lw 2 dt 1 lc rgb '#d62728' title 'linear model' noenhanced, 'xty_r2_by_layer.csv' using 1:7 with linespoints lw 2 dt 3 lc rgb '#d62728' title 'linear acts_init' noenhanced, 'xty_r2_by_layer.csv' using 1:8 with linespoints lw 2 dt 4 lc rgb '#d62728' title 'linear acts_fixedw' noenhanced, 'xty_r2_by_layer.csv' using 1:9 with linespoints lw 2 dt 5 lc rgb '#d62728' title 'linear shuffled' noenhanced, 'xty_r2_by_layer.csv' using 1:10 with linespoints lw 2 dt 1 lc rgb '#2ca02c' title 'mlp model' noenhanced, 'xty_r2_by_layer.csv' using 1:11 with linespoints lw 2 dt 3 lc rgb '#2ca02c' title 'mlp acts_init' noenhanced, 'xty_r2_by_layer.csv' using 1:12 with linespoints lw 2 dt 4 lc rgb '#2ca02c' title 'mlp acts_fixedw' noenhanced, 'xty_r2_by_layer.csv' using 1:13 with linespoints lw 2 dt 5 lc rgb '#2ca02c' title 'mlp shuffled' noenhanced
set terminal pngcairo size 800,560
set output 'xty_ridge_heatmap.png'
set datafile separator whitespace
set title 'xty (ridge): test R^2 over layer and k' noenhanced
set xlabel 'layer'
set ylabel 'k (examples)'
set yrange [*:*]
set cbrange [0:1]
set palette rgb 33,13,10
set view map
plot 'xty_ridge_heatmap.dat' using 1:2:3 with image notitle
set datafile separator ','
set terminal svg size 800,560
set output 'xty_ridge_heatmap.svg'
set datafile separator whitespace
set title 'xty (ridge): test R^2 over layer and k' noenhanced
set xlabel 'layer'
set ylabel 'k (examples)'
set yrange [*:*]
set cbrange [0:1]
set palette rgb 33,13,10
set view map
plot 'xty_ridge_heatmap.dat' using 1:2:3 with image notitle
set datafile separator ','
set terminal pngcairo size 800,560
set output 'xty_linear_heatmap.png'
set datafile separator whitespace
set title 'xty (linear): test R^2 over layer and k' noenhanced
set xlabel 'layer'
set ylabel 'k (examples)'
set yrange [*:*]
set cbrange [0:1]
set palette rgb 33,13,10
set view map
plot 'xty_linear_heatmap.dat' using 1:2:3 with image notitle
set datafile separator ','
set terminal svg size 800,560
set output 'xty_linear_heatmap.svg'
set datafile separator whitespace
set title 'xty (linear): test R^2 over layer and k' noenhanced
set xlabel 'layer'
set ylabel 'k (examples)'
set yrange [*:*]
set cbrange [0:1]
set palette rgb 33,13,10
set view map
plot 'xty_linear_heatmap.dat' using 1:2:3 with image notitle
set datafile separator ','
set terminal pngcairo size 800,560
set output 'xty_mlp_heatmap.png'
set datafile separator whitespace
set title 'xty (mlp): test R^2 over layer and k' noenhanced
set xlabel 'layer'
set ylabel 'k (examples)'
set yrange [*:*]
set cbrange [0:1]
set palette rgb 33,13,10
set view map
plot 'xty_mlp_heatmap.dat' using 1:2:3 with image notitle
set datafile separator ','
set terminal svg size 800,560
set output 'xty_mlp_heatmap.svg'
set datafile separator whitespace
set title 'xty (mlp): test R^2 over layer and k' noenhanced
set xlabel 'layer'
set ylabel 'k (examples)'
set yrange [*:*]
set cbrange [0:1]
set palette rgb 33,13,10
set view map
plot 'xty_mlp_heatmap.dat' using 1:2:3 with image notitle
set datafile separator ','
set terminal pngcairo size 800,480
set output 'w_ols_linear_alpha.png'
set title 'w_ols (linear): pooling weights at layer 5, k = 12' noenhanced
set xlabel 'position (state after k examples = 2k-1)'
set ylabel 'alpha'
set yrange [0:*]
set style fill solid
plot 'w_ols_linear_alpha.csv' using 1:2 with boxes lc rgb '#1f77b4' notitle
set terminal svg size 800,480
set output 'w_ols_linear_alpha.svg'
set title 'w_ols (linear): pooling weights at layer 5, k = 12' noenhanced
set xlabel 'position (state after k examples = 2k-1)'
set ylabel 'alpha'
set yrange [0:*]
set style fill solid
plot 'w_ols_linear_alpha.csv' using 1:2 with boxes lc rgb '#1f77b4' notitle
set terminal pngcairo size 800,480
set output 'w_ols_mlp_alpha.png'
set title 'w_ols (mlp): pooling weights at layer 4, k = 12' noenhanced
set xlabel 'position (state after k examples = 2k-1)'
set ylabel 'alpha'
set yrange [0:*]
set style fill solid
plot 'w_ols_mlp_alpha.csv' using 1:2 with boxes lc rgb '#1f77b4' notitle
set terminal svg size 800,480
set output 'w_ols_mlp_alpha.svg'
set title 'w_ols (mlp): pooling weights at layer 4, k = 12' noenhanced
set xlabel 'position (state after k examples = 2k-1)'
set ylabel 'alpha'
set yrange [0:*]
set style fill solid
plot 'w_ols_mlp_alpha.csv' using 1:2 with boxes lc rgb '#1f77b4' notitle
set terminal pngcairo size 800,480
set output 'xty_linear_alpha.png'
set title 'xty (linear): pooling weights at layer 5, k = 12' noenhanced
set xlabel 'position (state after k examples = 2k-1)'
set ylabel 'alpha'
set yrange [0:*]
set style fill solid
plot 'xty_linear_alpha.csv' using 1:2 with boxes lc rgb '#1f77b4' notitle
set terminal svg size 800,480
set output 'xty_linear_alpha.svg'
set title 'xty (linear): pooling weights at layer 5, k = 12' noenhanced
set xlabel 'position (state after k examples = 2k-1)'
set ylabel 'alpha'
set yrange [0:*]
set style fill solid
plot 'xty_linear_alpha.csv' using 1:2 with boxes lc rgb '#1f77b4' notitle
set terminal pngcairo size 800,480
set output 'xty_mlp_alpha.png'
set title 'xty (mlp): pooling weights at layer 4, k = 12' noenhanced
set xlabel 'position (state after k examples = 2k-1)'
set ylabel 'alpha'
set yrange [0:*]
set style fill solid
plot 'xty_mlp_alpha.csv' using 1:2 with boxes lc rgb '#1f77b4' notitle
set terminal svg size 800,480
set output 'xty_mlp_alpha.svg'
set title 'xty (mlp): pooling weights at layer 4, k = 12' noenhanced
set xlabel 'position (state after k examples = 2k-1)'
set ylabel 'alpha'
set yrange [0:*]
set style fill solid
plot 'xty_mlp_alpha.csv' using 1:2 with boxes lc rgb '#1f77b4' notitle
