# gnuplot script written by iclprobe compare; rerun with: gnuplot plots.gp
set datafile separator ','
set key outside right top noenhanced
set grid
set logscale y
set format y '10^{%L}'
set terminal pngcairo size 1000,600
set output 'spd_cell0.png'
set title 'd4: SPD / d to each learner (4 seeds, 95% intervals over seeds, then prompts)' noenhanced
set xlabel 'k (examples in context)'
set ylabel 'SPD / d'
plot 'spd_cell0.csv' index 0 using 1:2:3:4 with yerrorlines lw 2 title 'ols', 'spd_cell0.csv' index 1 using 1:2:3:4 with yerrorlines lw 2 title 'ridge:0.1', 'spd_cell0.csv' index 2 using 1:2:3:4 with yerrorlines lw 2 title 'ridge:fit', 'spd_cell0.csv' index 3 using 1:2:3:4 with yerrorlines lw 2 title 'gd:0.02', 'spd_cell0.csv' index 4 using 1:2:3:4 with yerrorlines lw 2 title 'gd:fit', 'spd_cell0.csv' index 5 using 1:2:3:4 with yerrorlines lw 2 title 'gd:fit:1..16', 'spd_cell0.csv' index 6 using 1:2:3:4 with yerrorlines lw 2 title 'newton:3', 'spd_cell0.csv' index 7 using 1:2:3:4 with yerrorlines lw 2 title 'newton:fit', 'spd_cell0.csv' index 8 using 1:2:3:4 with yerrorlines lw 2 title 'knn:3'
set terminal svg size 1000,600
set output 'spd_cell0.svg'
set title 'd4: SPD / d to each learner (4 seeds, 95% intervals over seeds, then prompts)' noenhanced
set xlabel 'k (examples in context)'
set ylabel 'SPD / d'
plot 'spd_cell0.csv' index 0 using 1:2:3:4 with yerrorlines lw 2 title 'ols', 'spd_cell0.csv' index 1 using 1:2:3:4 with yerrorlines lw 2 title 'ridge:0.1', 'spd_cell0.csv' index 2 using 1:2:3:4 with yerrorlines lw 2 title 'ridge:fit', 'spd_cell0.csv' index 3 using 1:2:3:4 with yerrorlines lw 2 title 'gd:0.02', 'spd_cell0.csv' index 4 using 1:2:3:4 with yerrorlines lw 2 title 'gd:fit', 'spd_cell0.csv' index 5 using 1:2:3:4 with yerrorlines lw 2 title 'gd:fit:1..16', 'spd_cell0.csv' index 6 using 1:2:3:4 with yerrorlines lw 2 title 'newton:3', 'spd_cell0.csv' index 7 using 1:2:3:4 with yerrorlines lw 2 title 'newton:fit', 'spd_cell0.csv' index 8 using 1:2:3:4 with yerrorlines lw 2 title 'knn:3'
set terminal pngcairo size 1000,600
set output 'spd_cell1.png'
set title 'd4@10000: SPD / d to each learner (1 seed, 95% intervals over prompts)' noenhanced
set xlabel 'k (examples in context)'
set ylabel 'SPD / d'
plot 'spd_cell1.csv' index 0 using 1:2:3:4 with yerrorlines lw 2 title 'ols', 'spd_cell1.csv' index 1 using 1:2:3:4 with yerrorlines lw 2 title 'ridge:0.1', 'spd_cell1.csv' index 2 using 1:2:3:4 with yerrorlines lw 2 title 'ridge:fit', 'spd_cell1.csv' index 3 using 1:2:3:4 with yerrorlines lw 2 title 'gd:0.02', 'spd_cell1.csv' index 4 using 1:2:3:4 with yerrorlines lw 2 title 'gd:fit', 'spd_cell1.csv' index 5 using 1:2:3:4 with yerrorlines lw 2 title 'gd:fit:1..16', 'spd_cell1.csv' index 6 using 1:2:3:4 with yerrorlines lw 2 title 'newton:3', 'spd_cell1.csv' index 7 using 1:2:3:4 with yerrorlines lw 2 title 'newton:fit', 'spd_cell1.csv' index 8 using 1:2:3:4 with yerrorlines lw 2 title 'knn:3'
set terminal svg size 1000,600
set output 'spd_cell1.svg'
set title 'd4@10000: SPD / d to each learner (1 seed, 95% intervals over prompts)' noenhanced
set xlabel 'k (examples in context)'
set ylabel 'SPD / d'
plot 'spd_cell1.csv' index 0 using 1:2:3:4 with yerrorlines lw 2 title 'ols', 'spd_cell1.csv' index 1 using 1:2:3:4 with yerrorlines lw 2 title 'ridge:0.1', 'spd_cell1.csv' index 2 using 1:2:3:4 with yerrorlines lw 2 title 'ridge:fit', 'spd_cell1.csv' index 3 using 1:2:3:4 with yerrorlines lw 2 title 'gd:0.02', 'spd_cell1.csv' index 4 using 1:2:3:4 with yerrorlines lw 2 title 'gd:fit', 'spd_cell1.csv' index 5 using 1:2:3:4 with yerrorlines lw 2 title 'gd:fit:1..16', 'spd_cell1.csv' index 6 using 1:2:3:4 with yerrorlines lw 2 title 'newton:3', 'spd_cell1.csv' index 7 using 1:2:3:4 with yerrorlines lw 2 title 'newton:fit', 'spd_cell1.csv' index 8 using 1:2:3:4 with yerrorlines lw 2 title 'knn:3'
set terminal pngcairo size 1000,600
set output 'spd_cell2.png'
set title 'd4@5000: SPD / d to each learner (1 seed, 95% intervals over prompts)' noenhanced
set xlabel 'k (examples in context)'
set ylabel 'SPD / d'
plot 'spd_cell2.csv' index 0 using 1:2:3:4 with yerrorlines lw 2 title 'ols', 'spd_cell2.csv' index 1 using 1:2:3:4 with yerrorlines lw 2 title 'ridge:0.1', 'spd_cell2.csv' index 2 using 1:2:3:4 with yerrorlines lw 2 title 'ridge:fit', 'spd_cell2.csv' index 3 using 1:2:3:4 with yerrorlines lw 2 title 'gd:0.02', 'spd_cell2.csv' index 4 using 1:2:3:4 with yerrorlines lw 2 title 'gd:fit', 'spd_cell2.csv' index 5 using 1:2:3:4 with yerrorlines lw 2 title 'gd:fit:1..16', 'spd_cell2.csv' index 6 using 1:2:3:4 with yerrorlines lw 2 title 'newton:3', 'spd_cell2.csv' index 7 using 1:2:3:4 with yerrorlines lw 2 title 'newton:fit', 'spd_cell2.csv' index 8 using 1:2:3:4 with yerrorlines lw 2 title 'knn:3'
set terminal svg size 1000,600
set output 'spd_cell2.svg'
set title 'd4@5000: SPD / d to each learner (1 seed, 95% intervals over prompts)' noenhanced
set xlabel 'k (examples in context)'
set ylabel 'SPD / d'
plot 'spd_cell2.csv' index 0 using 1:2:3:4 with yerrorlines lw 2 title 'ols', 'spd_cell2.csv' index 1 using 1:2:3:4 with yerrorlines lw 2 title 'ridge:0.1', 'spd_cell2.csv' index 2 using 1:2:3:4 with yerrorlines lw 2 title 'ridge:fit', 'spd_cell2.csv' index 3 using 1:2:3:4 with yerrorlines lw 2 title 'gd:0.02', 'spd_cell2.csv' index 4 using 1:2:3:4 with yerrorlines lw 2 title 'gd:fit', 'spd_cell2.csv' index 5 using 1:2:3:4 with yerrorlines lw 2 title 'gd:fit:1..16', 'spd_cell2.csv' index 6 using 1:2:3:4 with yerrorlines lw 2 title 'newton:3', 'spd_cell2.csv' index 7 using 1:2:3:4 with yerrorlines lw 2 title 'newton:fit', 'spd_cell2.csv' index 8 using 1:2:3:4 with yerrorlines lw 2 title 'knn:3'
