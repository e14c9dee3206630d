# gnuplot script written by iclprobe report; rerun with: gnuplot plots.gp
set datafile separator ','
set key outside right top
set grid
set terminal pngcairo size 900,560
set output 'w_ols_r2_by_layer.png'
set title 'w_ols: test R^2 by layer (k = 8), 95% intervals' noenhanced
set xlabel 'layer (0 = embedding)'
set ylabel 'R^2'
set yrange [*:1.05]
set xtics 1
plot 'w_ols_r2_by_layer.csv' using 1:2:3:4 with yerrorlines lw 2 dt 1 lc rgb '#1f77b4' title 'ridge model' noenhanced
set terminal svg size 900,560
set output 'w_ols_r2_by_layer.svg'
set title 'w_ols: test R^2 by layer (k = 8), 95% intervals' noenhanced
set xlabel 'layer (0 = embedding)'
set ylabel 'R^2'
set yrange [*:1.05]
set xtics 1
plot 'w_ols_r2_by_layer.csv' using 1:2:3:4 with yerrorlines lw 2 dt 1 lc rgb '#1f77b4' title 'ridge model' noenhanced
set terminal pngcairo size 800,560
set output 'w_ols_ridge_heatmap.png'
set datafile separator whitespace
set title 'w_ols (ridge): test R^2 over layer and k; ~: 95% interval contains the onset threshold' noenhanced
set xlabel 'layer (0 = embedding)'
set ylabel 'k (examples; probed k only)'
set xtics ('0' 0, '1' 1, '2' 2, '3' 3, '4' 4, '5' 5, '6' 6, '7' 7, '8' 8)
set ytics ('4' 0, '8' 1)
set xrange [-0.5:8.5]
set yrange [-0.5:1.5]
set cbrange [0:1]
set cblabel 'R^2'
set palette defined (0 '#440154', 0.25 '#3b528b', 0.5 '#21918c', 0.75 '#5ec962', 1 '#fde725')
unset key
plot 'w_ols_ridge_heatmap.dat' using 1:2:5 with image, '' using 1:2:8:(($5 > 0.6) ? 0 : 16777215) with labels font ',9' tc rgb variable
set datafile separator ','
unset xrange
unset yrange
set xtics autofreq
set ytics autofreq
unset cblabel
set terminal svg size 800,560
set output 'w_ols_ridge_heatmap.svg'
set datafile separator whitespace
set title 'w_ols (ridge): test R^2 over layer and k; ~: 95% interval contains the onset threshold' noenhanced
set xlabel 'layer (0 = embedding)'
set ylabel 'k (examples; probed k only)'
set xtics ('0' 0, '1' 1, '2' 2, '3' 3, '4' 4, '5' 5, '6' 6, '7' 7, '8' 8)
set ytics ('4' 0, '8' 1)
set xrange [-0.5:8.5]
set yrange [-0.5:1.5]
set cbrange [0:1]
set cblabel 'R^2'
set palette defined (0 '#440154', 0.25 '#3b528b', 0.5 '#21918c', 0.75 '#5ec962', 1 '#fde725')
unset key
plot 'w_ols_ridge_heatmap.dat' using 1:2:5 with image, '' using 1:2:8:(($5 > 0.6) ? 0 : 16777215) with labels font ',9' tc rgb variable
set datafile separator ','
unset xrange
unset yrange
set xtics autofreq
set ytics autofreq
unset cblabel
set terminal pngcairo size 900,560
set output 'xty_r2_by_layer.png'
set title 'xty: test R^2 by layer (k = 8), 95% intervals' noenhanced
set xlabel 'layer (0 = embedding)'
set ylabel 'R^2'
set yrange [*:1.05]
set xtics 1
plot 'xty_r2_by_layer.csv' using 1:2:3:4 with yerrorlines lw 2 dt 1 lc rgb '#1f77b4' title 'ridge model' noenhanced
set terminal svg size 900,560
set output 'xty_r2_by_layer.svg'
set title 'xty: test R^2 by layer (k = 8), 95% intervals' noenhanced
set xlabel 'layer (0 = embedding)'
set ylabel 'R^2'
set yrange [*:1.05]
set xtics 1
plot 'xty_r2_by_layer.csv' using 1:2:3:4 with yerrorlines lw 2 dt 1 lc rgb '#1f77b4' title 'ridge model' noenhanced
set terminal pngcairo size 800,560
set output 'xty_ridge_heatmap.png'
set datafile separator whitespace
set title 'xty (ridge): test R^2 over layer and k; ~: 95% interval contains the onset threshold' noenhanced
set xlabel 'layer (0 = embedding)'
set ylabel 'k (examples; probed k only)'
set xtics ('0' 0, '1' 1, '2' 2, '3' 3, '4' 4, '5' 5, '6' 6, '7' 7, '8' 8)
set ytics ('4' 0, '8' 1)
set xrange [-0.5:8.5]
set yrange [-0.5:1.5]
set cbrange [0:1]
set cblabel 'R^2'
set palette defined (0 '#440154', 0.25 '#3b528b', 0.5 '#21918c', 0.75 '#5ec962', 1 '#fde725')
unset key
plot 'xty_ridge_heatmap.dat' using 1:2:5 with image, '' using 1:2:8:(($5 > 0.6) ? 0 : 16777215) with labels font ',9' tc rgb variable
set datafile separator ','
unset xrange
unset yrange
set xtics autofreq
set ytics autofreq
unset cblabel
set terminal svg size 800,560
set output 'xty_ridge_heatmap.svg'
set datafile separator whitespace
set title 'xty (ridge): test R^2 over layer and k; ~: 95% interval contains the onset threshold' noenhanced
set xlabel 'layer (0 = embedding)'
set ylabel 'k (examples; probed k only)'
set xtics ('0' 0, '1' 1, '2' 2, '3' 3, '4' 4, '5' 5, '6' 6, '7' 7, '8' 8)
set ytics ('4' 0, '8' 1)
set xrange [-0.5:8.5]
set yrange [-0.5:1.5]
set cbrange [0:1]
set cblabel 'R^2'
set palette defined (0 '#440154', 0.25 '#3b528b', 0.5 '#21918c', 0.75 '#5ec962', 1 '#fde725')
unset key
plot 'xty_ridge_heatmap.dat' using 1:2:5 with image, '' using 1:2:8:(($5 > 0.6) ? 0 : 16777215) with labels font ',9' tc rgb variable
set datafile separator ','
unset xrange
unset yrange
set xtics autofreq
set ytics autofreq
unset cblabel
set terminal pngcairo size 900,560
set output 'intervene_w_ols_probed_k4.png'
set title 'is w_ols used? edits at probed, k = 4, 1000 pairs (95% intervals)' noenhanced
set xlabel 'layer (0 = embedding)'
set ylabel 'slope, R^2'
set yrange [*:*]
set xtics 1
set key inside top left box opaque
plot 'intervene_w_ols_probed_k4.csv' using 1:2:3:4 with yerrorlines lw 2 lc rgb '#1f77b4' title 'slope, probe edit', 'intervene_w_ols_probed_k4.csv' using 1:5:6:7 with yerrorlines lw 2 dt 2 lc rgb '#7f7f7f' title 'slope, random direction', 'intervene_w_ols_probed_k4.csv' using 1:8 with linespoints lw 2 lc rgb '#d62728' title 'ridge probe R^2'
set key outside right top noopaque nobox
set terminal svg size 900,560
set output 'intervene_w_ols_probed_k4.svg'
set title 'is w_ols used? edits at probed, k = 4, 1000 pairs (95% intervals)' noenhanced
set xlabel 'layer (0 = embedding)'
set ylabel 'slope, R^2'
set yrange [*:*]
set xtics 1
set key inside top left box opaque
plot 'intervene_w_ols_probed_k4.csv' using 1:2:3:4 with yerrorlines lw 2 lc rgb '#1f77b4' title 'slope, probe edit', 'intervene_w_ols_probed_k4.csv' using 1:5:6:7 with yerrorlines lw 2 dt 2 lc rgb '#7f7f7f' title 'slope, random direction', 'intervene_w_ols_probed_k4.csv' using 1:8 with linespoints lw 2 lc rgb '#d62728' title 'ridge probe R^2'
set key outside right top noopaque nobox
set terminal pngcairo size 900,560
set output 'intervene_w_ols_probed_k8.png'
set title 'is w_ols used? edits at probed, k = 8, 1000 pairs (95% intervals)' noenhanced
set xlabel 'layer (0 = embedding)'
set ylabel 'slope, R^2'
set yrange [*:*]
set xtics 1
set key inside top left box opaque
plot 'intervene_w_ols_probed_k8.csv' using 1:2:3:4 with yerrorlines lw 2 lc rgb '#1f77b4' title 'slope, probe edit', 'intervene_w_ols_probed_k8.csv' using 1:5:6:7 with yerrorlines lw 2 dt 2 lc rgb '#7f7f7f' title 'slope, random direction', 'intervene_w_ols_probed_k8.csv' using 1:8 with linespoints lw 2 lc rgb '#d62728' title 'ridge probe R^2'
set key outside right top noopaque nobox
set terminal svg size 900,560
set output 'intervene_w_ols_probed_k8.svg'
set title 'is w_ols used? edits at probed, k = 8, 1000 pairs (95% intervals)' noenhanced
set xlabel 'layer (0 = embedding)'
set ylabel 'slope, R^2'
set yrange [*:*]
set xtics 1
set key inside top left box opaque
plot 'intervene_w_ols_probed_k8.csv' using 1:2:3:4 with yerrorlines lw 2 lc rgb '#1f77b4' title 'slope, probe edit', 'intervene_w_ols_probed_k8.csv' using 1:5:6:7 with yerrorlines lw 2 dt 2 lc rgb '#7f7f7f' title 'slope, random direction', 'intervene_w_ols_probed_k8.csv' using 1:8 with linespoints lw 2 lc rgb '#d62728' title 'ridge probe R^2'
set key outside right top noopaque nobox
set terminal pngcairo size 900,560
set output 'intervene_w_ols_through-query_k4.png'
set title 'is w_ols used? edits at through-query, k = 4, 1000 pairs (95% intervals)' noenhanced
set xlabel 'layer (0 = embedding)'
set ylabel 'slope, R^2'
set yrange [*:*]
set xtics 1
set key inside top left box opaque
plot 'intervene_w_ols_through-query_k4.csv' using 1:2:3:4 with yerrorlines lw 2 lc rgb '#1f77b4' title 'slope, probe edit', 'intervene_w_ols_through-query_k4.csv' using 1:5:6:7 with yerrorlines lw 2 dt 2 lc rgb '#7f7f7f' title 'slope, random direction', 'intervene_w_ols_through-query_k4.csv' using 1:8 with linespoints lw 2 lc rgb '#d62728' title 'ridge probe R^2'
set key outside right top noopaque nobox
set terminal svg size 900,560
set output 'intervene_w_ols_through-query_k4.svg'
set title 'is w_ols used? edits at through-query, k = 4, 1000 pairs (95% intervals)' noenhanced
set xlabel 'layer (0 = embedding)'
set ylabel 'slope, R^2'
set yrange [*:*]
set xtics 1
set key inside top left box opaque
plot 'intervene_w_ols_through-query_k4.csv' using 1:2:3:4 with yerrorlines lw 2 lc rgb '#1f77b4' title 'slope, probe edit', 'intervene_w_ols_through-query_k4.csv' using 1:5:6:7 with yerrorlines lw 2 dt 2 lc rgb '#7f7f7f' title 'slope, random direction', 'intervene_w_ols_through-query_k4.csv' using 1:8 with linespoints lw 2 lc rgb '#d62728' title 'ridge probe R^2'
set key outside right top noopaque nobox
set terminal pngcairo size 900,560
set output 'intervene_w_ols_through-query_k8.png'
set title 'is w_ols used? edits at through-query, k = 8, 1000 pairs (95% intervals)' noenhanced
set xlabel 'layer (0 = embedding)'
set ylabel 'slope, R^2'
set yrange [*:*]
set xtics 1
set key inside top left box opaque
plot 'intervene_w_ols_through-query_k8.csv' using 1:2:3:4 with yerrorlines lw 2 lc rgb '#1f77b4' title 'slope, probe edit', 'intervene_w_ols_through-query_k8.csv' using 1:5:6:7 with yerrorlines lw 2 dt 2 lc rgb '#7f7f7f' title 'slope, random direction', 'intervene_w_ols_through-query_k8.csv' using 1:8 with linespoints lw 2 lc rgb '#d62728' title 'ridge probe R^2'
set key outside right top noopaque nobox
set terminal svg size 900,560
set output 'intervene_w_ols_through-query_k8.svg'
set title 'is w_ols used? edits at through-query, k = 8, 1000 pairs (95% intervals)' noenhanced
set xlabel 'layer (0 = embedding)'
set ylabel 'slope, R^2'
set yrange [*:*]
set xtics 1
set key inside top left box opaque
plot 'intervene_w_ols_through-query_k8.csv' using 1:2:3:4 with yerrorlines lw 2 lc rgb '#1f77b4' title 'slope, probe edit', 'intervene_w_ols_through-query_k8.csv' using 1:5:6:7 with yerrorlines lw 2 dt 2 lc rgb '#7f7f7f' title 'slope, random direction', 'intervene_w_ols_through-query_k8.csv' using 1:8 with linespoints lw 2 lc rgb '#d62728' title 'ridge probe R^2'
set key outside right top noopaque nobox
set terminal pngcairo size 900,560
set output 'intervene_xty_probed_k4.png'
set title 'is xty used? edits at probed, k = 4, 1000 pairs (95% intervals)' noenhanced
set xlabel 'layer (0 = embedding)'
set ylabel 'slope, R^2'
set yrange [*:*]
set xtics 1
set key inside top left box opaque
plot 'intervene_xty_probed_k4.csv' using 1:2:3:4 with yerrorlines lw 2 lc rgb '#1f77b4' title 'slope, probe edit', 'intervene_xty_probed_k4.csv' using 1:5:6:7 with yerrorlines lw 2 dt 2 lc rgb '#7f7f7f' title 'slope, random direction', 'intervene_xty_probed_k4.csv' using 1:8 with linespoints lw 2 lc rgb '#d62728' title 'ridge probe R^2'
set key outside right top noopaque nobox
set terminal svg size 900,560
set output 'intervene_xty_probed_k4.svg'
set title 'is xty used? edits at probed, k = 4, 1000 pairs (95% intervals)' noenhanced
set xlabel 'layer (0 = embedding)'
set ylabel 'slope, R^2'
set yrange [*:*]
set xtics 1
set key inside top left box opaque
plot 'intervene_xty_probed_k4.csv' using 1:2:3:4 with yerrorlines lw 2 lc rgb '#1f77b4' title 'slope, probe edit', 'intervene_xty_probed_k4.csv' using 1:5:6:7 with yerrorlines lw 2 dt 2 lc rgb '#7f7f7f' title 'slope, random direction', 'intervene_xty_probed_k4.csv' using 1:8 with linespoints lw 2 lc rgb '#d62728' title 'ridge probe R^2'
set key outside right top noopaque nobox
set terminal pngcairo size 900,560
set output 'intervene_xty_probed_k8.png'
set title 'is xty used? edits at probed, k = 8, 1000 pairs (95% intervals)' noenhanced
set xlabel 'layer (0 = embedding)'
set ylabel 'slope, R^2'
set yrange [*:*]
set xtics 1
set key inside top left box opaque
plot 'intervene_xty_probed_k8.csv' using 1:2:3:4 with yerrorlines lw 2 lc rgb '#1f77b4' title 'slope, probe edit', 'intervene_xty_probed_k8.csv' using 1:5:6:7 with yerrorlines lw 2 dt 2 lc rgb '#7f7f7f' title 'slope, random direction', 'intervene_xty_probed_k8.csv' using 1:8 with linespoints lw 2 lc rgb '#d62728' title 'ridge probe R^2'
set key outside right top noopaque nobox
set terminal svg size 900,560
set output 'intervene_xty_probed_k8.svg'
set title 'is xty used? edits at probed, k = 8, 1000 pairs (95% intervals)' noenhanced
set xlabel 'layer (0 = embedding)'
set ylabel 'slope, R^2'
set yrange [*:*]
set xtics 1
set key inside top left box opaque
plot 'intervene_xty_probed_k8.csv' using 1:2:3:4 with yerrorlines lw 2 lc rgb '#1f77b4' title 'slope, probe edit', 'intervene_xty_probed_k8.csv' using 1:5:6:7 with yerrorlines lw 2 dt 2 lc rgb '#7f7f7f' title 'slope, random direction', 'intervene_xty_probed_k8.csv' using 1:8 with linespoints lw 2 lc rgb '#d62728' title 'ridge probe R^2'
set key outside right top noopaque nobox
set terminal pngcairo size 900,560
set output 'intervene_xty_through-query_k4.png'
set title 'is xty used? edits at through-query, k = 4, 1000 pairs (95% intervals)' noenhanced
set xlabel 'layer (0 = embedding)'
set ylabel 'slope, R^2'
set yrange [*:*]
set xtics 1
set key inside top left box opaque
plot 'intervene_xty_through-query_k4.csv' using 1:2:3:4 with yerrorlines lw 2 lc rgb '#1f77b4' title 'slope, probe edit', 'intervene_xty_through-query_k4.csv' using 1:5:6:7 with yerrorlines lw 2 dt 2 lc rgb '#7f7f7f' title 'slope, random direction', 'intervene_xty_through-query_k4.csv' using 1:8 with linespoints lw 2 lc rgb '#d62728' title 'ridge probe R^2'
set key outside right top noopaque nobox
set terminal svg size 900,560
set output 'intervene_xty_through-query_k4.svg'
set title 'is xty used? edits at through-query, k = 4, 1000 pairs (95% intervals)' noenhanced
set xlabel 'layer (0 = embedding)'
set ylabel 'slope, R^2'
set yrange [*:*]
set xtics 1
set key inside top left box opaque
plot 'intervene_xty_through-query_k4.csv' using 1:2:3:4 with yerrorlines lw 2 lc rgb '#1f77b4' title 'slope, probe edit', 'intervene_xty_through-query_k4.csv' using 1:5:6:7 with yerrorlines lw 2 dt 2 lc rgb '#7f7f7f' title 'slope, random direction', 'intervene_xty_through-query_k4.csv' using 1:8 with linespoints lw 2 lc rgb '#d62728' title 'ridge probe R^2'
set key outside right top noopaque nobox
set terminal pngcairo size 900,560
set output 'intervene_xty_through-query_k8.png'
set title 'is xty used? edits at through-query, k = 8, 1000 pairs (95% intervals)' noenhanced
set xlabel 'layer (0 = embedding)'
set ylabel 'slope, R^2'
set yrange [*:*]
set xtics 1
set key inside top left box opaque
plot 'intervene_xty_through-query_k8.csv' using 1:2:3:4 with yerrorlines lw 2 lc rgb '#1f77b4' title 'slope, probe edit', 'intervene_xty_through-query_k8.csv' using 1:5:6:7 with yerrorlines lw 2 dt 2 lc rgb '#7f7f7f' title 'slope, random direction', 'intervene_xty_through-query_k8.csv' using 1:8 with linespoints lw 2 lc rgb '#d62728' title 'ridge probe R^2'
set key outside right top noopaque nobox
set terminal svg size 900,560
set output 'intervene_xty_through-query_k8.svg'
set title 'is xty used? edits at through-query, k = 8, 1000 pairs (95% intervals)' noenhanced
set xlabel 'layer (0 = embedding)'
set ylabel 'slope, R^2'
set yrange [*:*]
set xtics 1
set key inside top left box opaque
plot 'intervene_xty_through-query_k8.csv' using 1:2:3:4 with yerrorlines lw 2 lc rgb '#1f77b4' title 'slope, probe edit', 'intervene_xty_through-query_k8.csv' using 1:5:6:7 with yerrorlines lw 2 dt 2 lc rgb '#7f7f7f' title 'slope, random direction', 'intervene_xty_through-query_k8.csv' using 1:8 with linespoints lw 2 lc rgb '#d62728' title 'ridge probe R^2'
set key outside right top noopaque nobox
