# gnuplot script written by experiments/phase.sh; rerun with: gnuplot phase.gp
set terminal pngcairo size 980,760 noenhanced
set output 'phase.png'
set title "closest family by depth and width (d = 4, noiseless; ~: runner-up within noise)\ncolour: log10 of the fitted ridge lambda (high: like one GD step; low: like OLS)"
set xlabel 'hidden size H'
set ylabel 'layers L'
set xtics ('8' 0, '16' 1, '32' 2, '64' 3)
set ytics ('1' 0, '2' 1, '4' 2, '8' 3)
set xrange [-0.5:3.5]
set yrange [-0.5:3.5]
set cbrange [-2.2:2.2]
set cblabel 'log10 fitted ridge lambda'
set palette defined (-2.2 '#a63603', -0.5 '#fd8d3c', 0.7 '#fdd0a2', 2.2 '#3182bd')
unset key
plot 'phase.dat' using 1:2:3 with image, '' using 1:2:4 with labels font ',9'
