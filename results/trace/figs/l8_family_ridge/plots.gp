# gnuplot script written by iclprobe report; rerun with: gnuplot plots.gp
set datafile separator ','
set key outside right top
set grid
set terminal pngcairo size 900,560
set output 'trace_newton_16_learner_heatmap.png'
set datafile separator whitespace
set title 'learners of newton:16 (ridge readout): distance of each layer to each iterate' noenhanced
set xlabel 'iterate t'
set ylabel 'layer (0 = embedding)' offset -3,0
set lmargin 12
set xtics autofreq
set ytics ('0' 0, '1' 1, '2' 2, '3' 3, '4' 4, '5' 5, '6' 6, '7' 7, '8' 8)
unset logscale x
set xrange [-0.5:16.5]
set yrange [-0.5:8.5]
set cbrange [-4:0]
set cblabel 'log10(1 - similarity): lower = closer'
set palette defined (0 '#fde725', 0.25 '#5ec962', 0.5 '#21918c', 0.75 '#3b528b', 1 '#440154')
unset key
set view map
set pm3d map corners2color c1
splot 'trace_newton_16_learner_heatmap.dat' using 1:2:5 with pm3d
unset pm3d
set view 60,30
unset logscale x
set datafile separator ','
unset xrange
unset yrange
set ytics autofreq
unset cblabel
unset lmargin
set ylabel offset 0,0
set terminal svg size 900,560
set output 'trace_newton_16_learner_heatmap.svg'
set datafile separator whitespace
set title 'learners of newton:16 (ridge readout): distance of each layer to each iterate' noenhanced
set xlabel 'iterate t'
set ylabel 'layer (0 = embedding)' offset -3,0
set lmargin 12
set xtics autofreq
set ytics ('0' 0, '1' 1, '2' 2, '3' 3, '4' 4, '5' 5, '6' 6, '7' 7, '8' 8)
unset logscale x
set xrange [-0.5:16.5]
set yrange [-0.5:8.5]
set cbrange [-4:0]
set cblabel 'log10(1 - similarity): lower = closer'
set palette defined (0 '#fde725', 0.25 '#5ec962', 0.5 '#21918c', 0.75 '#3b528b', 1 '#440154')
unset key
set view map
set pm3d map corners2color c1
splot 'trace_newton_16_learner_heatmap.dat' using 1:2:5 with pm3d
unset pm3d
set view 60,30
unset logscale x
set datafile separator ','
unset xrange
unset yrange
set ytics autofreq
unset cblabel
unset lmargin
set ylabel offset 0,0
set terminal pngcairo size 900,560
set output 'trace_newton_16_control_heatmap.png'
set datafile separator whitespace
set title 'controls of newton:16 (ridge readout): distance of each layer to each iterate' noenhanced
set xlabel 'iterate t'
set ylabel 'layer (0 = embedding)' offset -3,0
set lmargin 12
set xtics autofreq
set ytics ('0' 0, '1' 1, '2' 2, '3' 3, '4' 4, '5' 5, '6' 6, '7' 7, '8' 8)
unset logscale x
set xrange [-0.5:16.5]
set yrange [-0.5:8.5]
set cbrange [-4:0]
set cblabel 'log10(1 - similarity): lower = closer'
set palette defined (0 '#fde725', 0.25 '#5ec962', 0.5 '#21918c', 0.75 '#3b528b', 1 '#440154')
unset key
set view map
set pm3d map corners2color c1
splot 'trace_newton_16_control_heatmap.dat' using 1:2:5 with pm3d
unset pm3d
set view 60,30
unset logscale x
set datafile separator ','
unset xrange
unset yrange
set ytics autofreq
unset cblabel
unset lmargin
set ylabel offset 0,0
set terminal svg size 900,560
set output 'trace_newton_16_control_heatmap.svg'
set datafile separator whitespace
set title 'controls of newton:16 (ridge readout): distance of each layer to each iterate' noenhanced
set xlabel 'iterate t'
set ylabel 'layer (0 = embedding)' offset -3,0
set lmargin 12
set xtics autofreq
set ytics ('0' 0, '1' 1, '2' 2, '3' 3, '4' 4, '5' 5, '6' 6, '7' 7, '8' 8)
unset logscale x
set xrange [-0.5:16.5]
set yrange [-0.5:8.5]
set cbrange [-4:0]
set cblabel 'log10(1 - similarity): lower = closer'
set palette defined (0 '#fde725', 0.25 '#5ec962', 0.5 '#21918c', 0.75 '#3b528b', 1 '#440154')
unset key
set view map
set pm3d map corners2color c1
splot 'trace_newton_16_control_heatmap.dat' using 1:2:5 with pm3d
unset pm3d
set view 60,30
unset logscale x
set datafile separator ','
unset xrange
unset yrange
set ytics autofreq
unset cblabel
unset lmargin
set ylabel offset 0,0
set terminal pngcairo size 900,560
set output 'trace_newton_16_curve.png'
set title 'newton:16: best-matching iterate per layer (ridge readout; 95% intervals)' noenhanced
set xlabel 'layer (0 = embedding)'
set ylabel 'best iterate'
unset logscale y
set yrange [-0.5:16.5]
set xtics 1
set key inside top left box opaque
plot 'trace_newton_16_curve.csv' using 1:2:3:4 with yerrorlines lw 2 lc rgb '#1f77b4' title 'learners', 'trace_newton_16_curve.csv' using 1:5:6:7 with yerrorlines lw 2 dt 2 lc rgb '#7f7f7f' title 'controls'
unset logscale y
unset yrange
set key outside right top noopaque nobox
set terminal svg size 900,560
set output 'trace_newton_16_curve.svg'
set title 'newton:16: best-matching iterate per layer (ridge readout; 95% intervals)' noenhanced
set xlabel 'layer (0 = embedding)'
set ylabel 'best iterate'
unset logscale y
set yrange [-0.5:16.5]
set xtics 1
set key inside top left box opaque
plot 'trace_newton_16_curve.csv' using 1:2:3:4 with yerrorlines lw 2 lc rgb '#1f77b4' title 'learners', 'trace_newton_16_curve.csv' using 1:5:6:7 with yerrorlines lw 2 dt 2 lc rgb '#7f7f7f' title 'controls'
unset logscale y
unset yrange
set key outside right top noopaque nobox
set terminal pngcairo size 900,560
set output 'trace_gd_0.0177_256_learner_heatmap.png'
set datafile separator whitespace
set title 'learners of gd:0.0177:256 (ridge readout): distance of each layer to each iterate' noenhanced
set xlabel 'iterate t (log scale, iterate 0 at 0.5)'
set ylabel 'layer (0 = embedding)' offset -3,0
set lmargin 12
set xtics autofreq
set ytics ('0' 0, '1' 1, '2' 2, '3' 3, '4' 4, '5' 5, '6' 6, '7' 7, '8' 8)
set logscale x 2
set xrange [0.5:257.5]
set yrange [-0.5:8.5]
set cbrange [-4:0]
set cblabel 'log10(1 - similarity): lower = closer'
set palette defined (0 '#fde725', 0.25 '#5ec962', 0.5 '#21918c', 0.75 '#3b528b', 1 '#440154')
unset key
set view map
set pm3d map corners2color c1
splot 'trace_gd_0.0177_256_learner_heatmap.dat' using 1:2:5 with pm3d
unset pm3d
set view 60,30
unset logscale x
set datafile separator ','
unset xrange
unset yrange
set ytics autofreq
unset cblabel
unset lmargin
set ylabel offset 0,0
set terminal svg size 900,560
set output 'trace_gd_0.0177_256_learner_heatmap.svg'
set datafile separator whitespace
set title 'learners of gd:0.0177:256 (ridge readout): distance of each layer to each iterate' noenhanced
set xlabel 'iterate t (log scale, iterate 0 at 0.5)'
set ylabel 'layer (0 = embedding)' offset -3,0
set lmargin 12
set xtics autofreq
set ytics ('0' 0, '1' 1, '2' 2, '3' 3, '4' 4, '5' 5, '6' 6, '7' 7, '8' 8)
set logscale x 2
set xrange [0.5:257.5]
set yrange [-0.5:8.5]
set cbrange [-4:0]
set cblabel 'log10(1 - similarity): lower = closer'
set palette defined (0 '#fde725', 0.25 '#5ec962', 0.5 '#21918c', 0.75 '#3b528b', 1 '#440154')
unset key
set view map
set pm3d map corners2color c1
splot 'trace_gd_0.0177_256_learner_heatmap.dat' using 1:2:5 with pm3d
unset pm3d
set view 60,30
unset logscale x
set datafile separator ','
unset xrange
unset yrange
set ytics autofreq
unset cblabel
unset lmargin
set ylabel offset 0,0
set terminal pngcairo size 900,560
set output 'trace_gd_0.0177_256_control_heatmap.png'
set datafile separator whitespace
set title 'controls of gd:0.0177:256 (ridge readout): distance of each layer to each iterate' noenhanced
set xlabel 'iterate t (log scale, iterate 0 at 0.5)'
set ylabel 'layer (0 = embedding)' offset -3,0
set lmargin 12
set xtics autofreq
set ytics ('0' 0, '1' 1, '2' 2, '3' 3, '4' 4, '5' 5, '6' 6, '7' 7, '8' 8)
set logscale x 2
set xrange [0.5:257.5]
set yrange [-0.5:8.5]
set cbrange [-4:0]
set cblabel 'log10(1 - similarity): lower = closer'
set palette defined (0 '#fde725', 0.25 '#5ec962', 0.5 '#21918c', 0.75 '#3b528b', 1 '#440154')
unset key
set view map
set pm3d map corners2color c1
splot 'trace_gd_0.0177_256_control_heatmap.dat' using 1:2:5 with pm3d
unset pm3d
set view 60,30
unset logscale x
set datafile separator ','
unset xrange
unset yrange
set ytics autofreq
unset cblabel
unset lmargin
set ylabel offset 0,0
set terminal svg size 900,560
set output 'trace_gd_0.0177_256_control_heatmap.svg'
set datafile separator whitespace
set title 'controls of gd:0.0177:256 (ridge readout): distance of each layer to each iterate' noenhanced
set xlabel 'iterate t (log scale, iterate 0 at 0.5)'
set ylabel 'layer (0 = embedding)' offset -3,0
set lmargin 12
set xtics autofreq
set ytics ('0' 0, '1' 1, '2' 2, '3' 3, '4' 4, '5' 5, '6' 6, '7' 7, '8' 8)
set logscale x 2
set xrange [0.5:257.5]
set yrange [-0.5:8.5]
set cbrange [-4:0]
set cblabel 'log10(1 - similarity): lower = closer'
set palette defined (0 '#fde725', 0.25 '#5ec962', 0.5 '#21918c', 0.75 '#3b528b', 1 '#440154')
unset key
set view map
set pm3d map corners2color c1
splot 'trace_gd_0.0177_256_control_heatmap.dat' using 1:2:5 with pm3d
unset pm3d
set view 60,30
unset logscale x
set datafile separator ','
unset xrange
unset yrange
set ytics autofreq
unset cblabel
unset lmargin
set ylabel offset 0,0
set terminal pngcairo size 900,560
set output 'trace_gd_0.0177_256_curve.png'
set title 'gd:0.0177:256: best-matching iterate per layer (ridge readout; 95% intervals)' noenhanced
set xlabel 'layer (0 = embedding)'
set ylabel 'best iterate (log scale; 0 not shown)'
set logscale y 2
set yrange [0.8:256.5]
set xtics 1
set key inside top left box opaque
plot 'trace_gd_0.0177_256_curve.csv' using 1:2:3:4 with yerrorlines lw 2 lc rgb '#1f77b4' title 'learners', 'trace_gd_0.0177_256_curve.csv' using 1:5:6:7 with yerrorlines lw 2 dt 2 lc rgb '#7f7f7f' title 'controls'
unset logscale y
unset yrange
set key outside right top noopaque nobox
set terminal svg size 900,560
set output 'trace_gd_0.0177_256_curve.svg'
set title 'gd:0.0177:256: best-matching iterate per layer (ridge readout; 95% intervals)' noenhanced
set xlabel 'layer (0 = embedding)'
set ylabel 'best iterate (log scale; 0 not shown)'
set logscale y 2
set yrange [0.8:256.5]
set xtics 1
set key inside top left box opaque
plot 'trace_gd_0.0177_256_curve.csv' using 1:2:3:4 with yerrorlines lw 2 lc rgb '#1f77b4' title 'learners', 'trace_gd_0.0177_256_curve.csv' using 1:5:6:7 with yerrorlines lw 2 dt 2 lc rgb '#7f7f7f' title 'controls'
unset logscale y
unset yrange
set key outside right top noopaque nobox
set terminal pngcairo size 900,560
set output 'trace_ridge-path_1000_0.0001_29_learner_heatmap.png'
set datafile separator whitespace
set title 'learners of ridge-path:1000:0.0001:29 (ridge readout): distance of each layer to each iterate' noenhanced
set xlabel 'iterate t'
set ylabel 'layer (0 = embedding)' offset -3,0
set lmargin 12
set xtics autofreq
set ytics ('0' 0, '1' 1, '2' 2, '3' 3, '4' 4, '5' 5, '6' 6, '7' 7, '8' 8)
unset logscale x
set xrange [-0.5:29.5]
set yrange [-0.5:8.5]
set cbrange [-4:0]
set cblabel 'log10(1 - similarity): lower = closer'
set palette defined (0 '#fde725', 0.25 '#5ec962', 0.5 '#21918c', 0.75 '#3b528b', 1 '#440154')
unset key
set view map
set pm3d map corners2color c1
splot 'trace_ridge-path_1000_0.0001_29_learner_heatmap.dat' using 1:2:5 with pm3d
unset pm3d
set view 60,30
unset logscale x
set datafile separator ','
unset xrange
unset yrange
set ytics autofreq
unset cblabel
unset lmargin
set ylabel offset 0,0
set terminal svg size 900,560
set output 'trace_ridge-path_1000_0.0001_29_learner_heatmap.svg'
set datafile separator whitespace
set title 'learners of ridge-path:1000:0.0001:29 (ridge readout): distance of each layer to each iterate' noenhanced
set xlabel 'iterate t'
set ylabel 'layer (0 = embedding)' offset -3,0
set lmargin 12
set xtics autofreq
set ytics ('0' 0, '1' 1, '2' 2, '3' 3, '4' 4, '5' 5, '6' 6, '7' 7, '8' 8)
unset logscale x
set xrange [-0.5:29.5]
set yrange [-0.5:8.5]
set cbrange [-4:0]
set cblabel 'log10(1 - similarity): lower = closer'
set palette defined (0 '#fde725', 0.25 '#5ec962', 0.5 '#21918c', 0.75 '#3b528b', 1 '#440154')
unset key
set view map
set pm3d map corners2color c1
splot 'trace_ridge-path_1000_0.0001_29_learner_heatmap.dat' using 1:2:5 with pm3d
unset pm3d
set view 60,30
unset logscale x
set datafile separator ','
unset xrange
unset yrange
set ytics autofreq
unset cblabel
unset lmargin
set ylabel offset 0,0
set terminal pngcairo size 900,560
set output 'trace_ridge-path_1000_0.0001_29_control_heatmap.png'
set datafile separator whitespace
set title 'controls of ridge-path:1000:0.0001:29 (ridge readout): distance of each layer to each iterate' noenhanced
set xlabel 'iterate t'
set ylabel 'layer (0 = embedding)' offset -3,0
set lmargin 12
set xtics autofreq
set ytics ('0' 0, '1' 1, '2' 2, '3' 3, '4' 4, '5' 5, '6' 6, '7' 7, '8' 8)
unset logscale x
set xrange [-0.5:29.5]
set yrange [-0.5:8.5]
set cbrange [-4:0]
set cblabel 'log10(1 - similarity): lower = closer'
set palette defined (0 '#fde725', 0.25 '#5ec962', 0.5 '#21918c', 0.75 '#3b528b', 1 '#440154')
unset key
set view map
set pm3d map corners2color c1
splot 'trace_ridge-path_1000_0.0001_29_control_heatmap.dat' using 1:2:5 with pm3d
unset pm3d
set view 60,30
unset logscale x
set datafile separator ','
unset xrange
unset yrange
set ytics autofreq
unset cblabel
unset lmargin
set ylabel offset 0,0
set terminal svg size 900,560
set output 'trace_ridge-path_1000_0.0001_29_control_heatmap.svg'
set datafile separator whitespace
set title 'controls of ridge-path:1000:0.0001:29 (ridge readout): distance of each layer to each iterate' noenhanced
set xlabel 'iterate t'
set ylabel 'layer (0 = embedding)' offset -3,0
set lmargin 12
set xtics autofreq
set ytics ('0' 0, '1' 1, '2' 2, '3' 3, '4' 4, '5' 5, '6' 6, '7' 7, '8' 8)
unset logscale x
set xrange [-0.5:29.5]
set yrange [-0.5:8.5]
set cbrange [-4:0]
set cblabel 'log10(1 - similarity): lower = closer'
set palette defined (0 '#fde725', 0.25 '#5ec962', 0.5 '#21918c', 0.75 '#3b528b', 1 '#440154')
unset key
set view map
set pm3d map corners2color c1
splot 'trace_ridge-path_1000_0.0001_29_control_heatmap.dat' using 1:2:5 with pm3d
unset pm3d
set view 60,30
unset logscale x
set datafile separator ','
unset xrange
unset yrange
set ytics autofreq
unset cblabel
unset lmargin
set ylabel offset 0,0
set terminal pngcairo size 900,560
set output 'trace_ridge-path_1000_0.0001_29_curve.png'
set title 'ridge-path:1000:0.0001:29: best-matching iterate per layer (ridge readout; 95% intervals)' noenhanced
set xlabel 'layer (0 = embedding)'
set ylabel 'best iterate'
unset logscale y
set yrange [-0.5:29.5]
set xtics 1
set key inside top left box opaque
plot 'trace_ridge-path_1000_0.0001_29_curve.csv' using 1:2:3:4 with yerrorlines lw 2 lc rgb '#1f77b4' title 'learners', 'trace_ridge-path_1000_0.0001_29_curve.csv' using 1:5:6:7 with yerrorlines lw 2 dt 2 lc rgb '#7f7f7f' title 'controls'
unset logscale y
unset yrange
set key outside right top noopaque nobox
set terminal svg size 900,560
set output 'trace_ridge-path_1000_0.0001_29_curve.svg'
set title 'ridge-path:1000:0.0001:29: best-matching iterate per layer (ridge readout; 95% intervals)' noenhanced
set xlabel 'layer (0 = embedding)'
set ylabel 'best iterate'
unset logscale y
set yrange [-0.5:29.5]
set xtics 1
set key inside top left box opaque
plot 'trace_ridge-path_1000_0.0001_29_curve.csv' using 1:2:3:4 with yerrorlines lw 2 lc rgb '#1f77b4' title 'learners', 'trace_ridge-path_1000_0.0001_29_curve.csv' using 1:5:6:7 with yerrorlines lw 2 dt 2 lc rgb '#7f7f7f' title 'controls'
unset logscale y
unset yrange
set key outside right top noopaque nobox
